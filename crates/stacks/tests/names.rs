//! Naming frames against ground truth: `nm -D` places libc's clock_nanosleep and fdatasync, and
//! the functions of a stripped shared library (only `.dynsym` left, no debug file anywhere);
//! a frame at any of their offsets is named as `nm -D` names it.

use latscope_stacks::elf::ElfInfo;
use latscope_stacks::Symbols;
use latscope_testkit::require_tool;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `(value, size)` of each defined dynamic symbol named `name`, as `nm -D -S` prints them.
fn nm_dynamic(file: &Path, name: &str) -> Option<(u64, u64)> {
    let out = Command::new("nm").args(["-D", "-S", "--defined-only"]).arg(file).output().unwrap();
    assert!(out.status.success(), "nm -D {}", file.display());
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let sym = f.get(3)?.split('@').next()?;
        (f.len() == 4 && sym == name)
            .then(|| (u64::from_str_radix(f[0], 16).unwrap(), u64::from_str_radix(f[1], 16).unwrap()))
    })
}

/// The file offset of virtual address `va` of `file`.
fn offset_of(file: &Path, va: u64) -> u64 {
    let info = ElfInfo::read(file).unwrap();
    let l = info.loads.iter().find(|l| va >= l.vaddr && va < l.vaddr + l.filesz).expect("a segment holds it");
    va - l.vaddr + l.offset
}

/// The outermost name at each of a few offsets inside `name` (start, middle, last byte).
fn assert_named(s: &mut Symbols, file: &Path, name: &str) {
    let (va, size) = nm_dynamic(file, name).unwrap_or_else(|| panic!("nm -D has no {name} in {}", file.display()));
    for va in [va, va + size / 2, va + size.max(1) - 1] {
        let off = offset_of(file, va);
        let got = s.name(file, off).unwrap_or_else(|| panic!("{name}+{off:#x}"));
        let outer = got.iter().rfind(|f| !f.inlined).expect("a function");
        assert_eq!(outer.function, name, "{}+{off:#x}: {got:?}", file.display());
    }
}

fn libc() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let path = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("/libc.so")).expect("libc");
    PathBuf::from(path)
}

#[test]
fn libc_functions_are_named_as_its_dynamic_symbol_table_names_them() {
    if !require_tool("libc_functions_are_named_as_its_dynamic_symbol_table_names_them", "nm") {
        return;
    }
    let mut s = Symbols::new();
    let libc = libc();
    for f in ["clock_nanosleep", "fdatasync", "nanosleep", "read"] {
        assert_named(&mut s, &libc, f);
    }
}

#[test]
fn a_stripped_library_is_named_from_its_dynamic_symbols() {
    let test = "a_stripped_library_is_named_from_its_dynamic_symbols";
    if !require_tool(test, "cc") || !require_tool(test, "nm") || !require_tool(test, "strip") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("lib.c");
    std::fs::write(
        &src,
        "int hidden_work(int x) { return x * 7 + 1; }\n\
         __attribute__((noinline)) int exported_wait(int x) { for (int i = 0; i < x; i++) __asm__ volatile(\"\"); return hidden_work(x); }\n\
         __attribute__((noinline)) int exported_other(int x) { return exported_wait(x) + 3; }\n",
    )
    .unwrap();
    let so = tmp.path().join("libw.so");
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("cc").args(["-O2", "-shared", "-fPIC", "-Wl,--build-id", "-o"]).arg(&so).arg(&src));
    ok(Command::new("strip").arg("--strip-all").arg(&so));
    let out = Command::new("nm").arg(&so).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no symbols"), "stripped: no .symtab");
    let mut s = Symbols::new();
    assert_named(&mut s, &so, "exported_wait");
    assert_named(&mut s, &so, "exported_other");

    // A file that is not there names nothing.
    assert_eq!(s.name(&tmp.path().join("gone.so"), 0x1000), None);
}
