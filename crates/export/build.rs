//! Rust types of OpenTelemetry's OTLP metrics messages, generated from the official `.proto` files
//! vendored under `proto/` (protox parses them: no `protoc` needed).

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let protos = ["proto/opentelemetry/proto/collector/metrics/v1/metrics_service.proto"];
    prost_build::compile_fds(protox::compile(protos, ["proto"])?)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
