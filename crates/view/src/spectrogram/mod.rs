//! The latency spectrogram: one row per interval, one column per latency range on a log axis,
//! each cell coloured by how many calls (or block requests) of that latency ended in that
//! interval. The view of sysdig's spectrogram chisel, without its flaws (see docs/SPECTROGRAM.md).
//!
//! - [`scale`]: bucket schemes and the log axis;
//! - [`model`]: [`Spectrogram`], the rows (counts per bucket and group, width-independent);
//! - [`color`]: the colour and glyph scale;
//! - [`render`]: frames as cell grids ([`render::compose`]), plain rows ([`render::PlainPrinter`]);
//! - [`svg`]: the SVG snapshot;
//! - [`feed`]: what a data source implements ([`Feed`]) and the retained event window for
//!   drill-down;
//! - [`tui`]: the interactive terminal view and the plain (piped) runner.

pub mod color;
pub mod feed;
pub mod model;
pub mod render;
pub mod scale;
pub mod sources;
pub mod svg;
pub mod tui;

pub use color::{Heat, Palette};
pub use feed::{DrillQuery, DrillResult, EventWindow, Feed, Visited, Visitor};
pub use model::{GroupOrder, Spectrogram};
pub use render::{DrawOptions, FeedStatus, Split};
pub use scale::{Axis, Buckets};
pub use sources::{CountFeed, FeedOptions, FileFeed, StreamFeed};
