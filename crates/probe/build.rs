//! Compiles the BPF C programs with clang and generates their Rust skeleton.
use libbpf_cargo::SkeletonBuilder;
use std::{env, path::PathBuf};

fn main() {
    let src = "src/bpf/latscope.bpf.c";
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo")).join("latscope.skel.rs");
    // clang comes from the environment (CLANG=...) or PATH; `make` installs it.
    let mut b = SkeletonBuilder::new();
    b.source(src).clang_args(["-I", "src/bpf", "-Wall", "-O2", "-g"]);
    if let Some(clang) = env::var_os("CLANG") {
        b.clang(clang);
    }
    if let Err(e) = b.build_and_generate(&out) {
        panic!("building the BPF programs failed (is clang installed? run `make deps`): {e:#}");
    }
    for f in [
        "src/bpf/latscope.bpf.c",
        "src/bpf/latscope.h",
        "src/bpf/fdname.bpf.h",
        "src/bpf/compat.bpf.h",
        "src/bpf/agg.bpf.h",
        "src/bpf/why.bpf.h",
        "src/bpf/vmlinux.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-env-changed=CLANG");
}
