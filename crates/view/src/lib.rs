//! latscope's views: everything that turns events or aggregates into something a person reads.
//!
//! Each module takes event batches or aggregates and renders one kind of output;
//! none of them knows where the events came from (live probes or a trace file).

pub mod diff;
pub mod eventlist;
pub mod events;
pub mod group;
pub mod heatmap;
pub mod histview;
pub mod info;
pub mod latagg;
pub mod locks;
pub mod reorder;
/// The chains of waits (`latscope-chain`), as the views use them.
pub use latscope_chain as chain;
pub mod spectrogram;
pub mod stacks;
pub mod svg;
pub mod text;
pub mod threads;
pub mod threadtime;
pub mod timeline;
pub mod top;
pub mod waits;
pub mod why;
pub mod whysvg;
