//! `latscope fields`: the fields filter expressions can use.

use anyhow::Result;
use std::process::ExitCode;

/// List every field filter expressions can use, with its type and meaning.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope fields
  latscope fields --json | jq -r '.[].name'")]
pub struct Args {
    /// JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let fields = latscope_filter::fields();
    if a.json {
        let v: Vec<_> = fields
            .iter()
            .map(|f| serde_json::json!({"name": f.name, "type": f.ty.name(), "description": f.description}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let w = fields.iter().map(|f| f.name.len()).max().unwrap_or(10);
        for f in fields {
            println!("{:w$}  {:9} {}", f.name, f.ty.name(), f.description);
        }
        println!(
            "\nOperators: = == != < <= > >= contains icontains startswith endswith glob iglob regex in (...) intersects (...) pmatch (...) exists"
        );
        println!("Modifiers: = anyof (a, b), oneof, allof. Transformers: tolower( ) toupper( ) b64( ) basename( ) len( ) concat( ) join( ); val(field) on the right.");
        println!("Combine with and, or, not and parentheses. Durations take units (1ms, 250us), sizes too (4KiB).");
    }
    Ok(ExitCode::SUCCESS)
}
