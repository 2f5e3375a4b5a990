//! Arguments every command of a kind shares, declared once and flattened into each command,
//! grouped by what they serve: reading a recording ([`read`]: `-r FILE`, `--input`, FILTER),
//! tracing live ([`live`]: `--syscalls`, `-p`, `--follow`, `--cgroup`, `-c`, `--buffer-size`),
//! printing and writing ([`output`]: `--json`, `--time`, output files); and turning them into
//! library options.

mod live;
mod output;
mod read;
mod window;

pub use live::*;
pub use output::*;
pub use read::*;
pub use window::*;
