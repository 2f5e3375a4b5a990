//! One module per subcommand: each has its `Args` (clap) and a `run` function.

pub mod events;
pub mod fields;
pub mod info;
pub mod record;
