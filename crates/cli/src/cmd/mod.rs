//! One module per subcommand: each has its `Args` (clap) and a `run` function.

pub mod agent;
pub mod bench;
pub mod check;
pub mod diff;
pub mod events;
pub mod export;
pub mod export_perfetto;
pub mod fields;
pub mod flight;
pub mod generate;
pub mod heatmap;
pub mod hist;
pub mod info;
pub mod load;
pub mod record;
pub mod replay;
pub mod serve;
pub mod spectrogram;
pub mod started;
pub mod timeline;
pub mod timeline_threads;
pub mod top;
pub mod top_why;
pub mod trigger;
pub mod why;
