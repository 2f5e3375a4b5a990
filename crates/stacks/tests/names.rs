//! Naming frames against ground truth: `nm -D` places libc's clock_nanosleep and fdatasync, and
//! the functions of a stripped shared library (only `.dynsym` left, no debug file anywhere);
//! a frame at any of their offsets is named as `nm -D` names it; and functions no symbol table of
//! the binary has, from its separate debug file (libc6-dbg's, and one a debug link names).

use latscope_stacks::debugfile::{BinaryInfo, DebugSearch};
use latscope_stacks::elf::ElfInfo;
use latscope_stacks::Symbols;
use latscope_testkit::{require_tool, skip};
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

/// `(value, size)` of the symbol `name` in `file`'s symbol table (`nm -S`: a debug file's).
fn nm_symbol(file: &Path, name: &str) -> Option<(u64, u64)> {
    let out = Command::new("nm").args(["-S", "--defined-only"]).arg(file).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 4 && f[3] == name)
            .then(|| (u64::from_str_radix(f[0], 16).unwrap(), u64::from_str_radix(f[1], 16).unwrap()))
    })
}

/// The debug file `search` finds for `binary` and accepts, if any.
fn debug_file_of(search: &DebugSearch, binary: &Path) -> Option<(PathBuf, BinaryInfo)> {
    let info = BinaryInfo::read(&std::fs::File::open(binary).unwrap()).unwrap();
    let found = search
        .candidates(binary, info.build_id.as_deref(), info.link.as_ref())
        .into_iter()
        .find(|c| std::fs::File::open(&c.path).is_ok_and(|mut f| info.is_debug_file(&mut f, 1 << 30)))?;
    let found = found.path;
    Some((found, info))
}

/// glibc's `start_thread` is not exported: only Debian's libc6-dbg (its debug file, by build
/// id under /usr/lib/debug) names it, with its source file and line.
#[test]
fn libc_internal_functions_are_named_from_its_separate_debug_file() {
    let test = "libc_internal_functions_are_named_from_its_separate_debug_file";
    if !require_tool(test, "nm") {
        return;
    }
    let libc = libc();
    let Some((debug, info)) = debug_file_of(&DebugSearch::system(), &libc) else {
        skip(test, "libc's debug file is not installed (libc6-dbg: make test installs it)");
        return;
    };
    assert!(debug.starts_with("/usr/lib/debug/.build-id"), "{}", debug.display());
    let (va, size) = nm_symbol(&debug, "start_thread").expect("start_thread in libc's debug file");
    let mut s = Symbols::new();
    for va in [va, va + size / 2] {
        let off = offset_of(&libc, va);
        assert_eq!(latscope_stacks::elf::vaddr_of(&info.loads, off), Some(va));
        // Without the debug file: not start_thread (the dynamic symbols do not have it).
        let plain = s.name(&libc, off);
        assert!(plain.iter().flatten().all(|f| f.function != "start_thread"), "{plain:?}");
        let named = s.name_split(&libc, off, &debug, va).unwrap_or_else(|| panic!("start_thread+{off:#x}"));
        let outer = named.iter().rfind(|f| !f.inlined).unwrap();
        assert_eq!(outer.function, "start_thread", "{named:?}");
        assert!(outer.source().is_some_and(|s| s.starts_with("pthread_create.c:")), "{named:?}");
    }
    // An exported function keeps its exported name (the debug file calls it __GI___clock_nanosleep
    // or __clock_nanosleep).
    let (va, _) = nm_dynamic(&libc, "clock_nanosleep").unwrap();
    let named = s.name_split(&libc, offset_of(&libc, va), &debug, va).unwrap();
    assert_eq!(named.iter().rfind(|f| !f.inlined).unwrap().function, "clock_nanosleep", "{named:?}");
}

/// `lib.c` holding a static function `hidden` (in no symbol table once stripped) and an
/// exported caller, built with `-g` into DIR/NAME with the linker flag `build_id`, its debug
/// information moved to DIR/DEBUG (`objcopy --only-keep-debug`) and the library stripped; with
/// `link`, a debug link to DEBUG added. `None` (said skipped) without the tools.
fn split_library(test: &str, dir: &Path, hidden: &str, build_id: &str, link: bool) -> Option<(PathBuf, PathBuf)> {
    for t in ["cc", "nm", "strip", "objcopy"] {
        if !require_tool(test, t) {
            return None;
        }
    }
    let src = dir.join("lib.c");
    std::fs::write(
        &src,
        format!(
            "__attribute__((noinline)) static int {hidden}(int x) {{ for (int i = 0; i < x; i++) __asm__ volatile(\"\"); return x * 7 + 1; }}\n\
             __attribute__((noinline)) int exported_call(int x) {{ return {hidden}(x) + 3; }}\n"
        ),
    )
    .unwrap();
    let so = dir.join("libw.so");
    let dbg = dir.join("libw.so.debug");
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("cc").args(["-O2", "-g", "-shared", "-fPIC", build_id, "-o"]).arg(&so).arg(&src));
    ok(Command::new("objcopy").arg("--only-keep-debug").arg(&so).arg(&dbg));
    ok(Command::new("strip").arg("--strip-all").arg(&so));
    if link {
        ok(Command::new("objcopy").arg(format!("--add-gnu-debuglink={}", dbg.display())).arg(&so));
    }
    Some((so, dbg))
}

/// A library stripped with its debug information moved out by `objcopy --only-keep-debug` and
/// linked back with `--add-gnu-debuglink`, built without a build id: its debug file is found
/// next to it by the link's name and accepted by the link's CRC; its static function (in no
/// symbol table of the library) is named with its line. A file of that name with other contents
/// is refused.
#[test]
fn a_debug_link_finds_a_stripped_librarys_static_functions() {
    let test = "a_debug_link_finds_a_stripped_librarys_static_functions";
    let tmp = tempfile::tempdir().unwrap();
    let Some((so, dbg)) = split_library(test, tmp.path(), "hidden_work", "-Wl,--build-id=none", true) else { return };
    let (va, size) = nm_symbol(&dbg, "hidden_work").expect("hidden_work in the debug file");
    let search = DebugSearch { dirs: vec![], debuginfod: vec![] };
    let (found, info) = debug_file_of(&search, &so).expect("the debug file next to the library");
    assert_eq!(found, dbg);
    assert_eq!(info.build_id, None);
    let mut s = Symbols::new();
    let off = offset_of(&so, va + size / 2);
    // The library alone, away from its debug file, does not name it.
    let away = tempfile::tempdir().unwrap();
    let alone = away.path().join("libw.so");
    std::fs::copy(&so, &alone).unwrap();
    assert_eq!(s.name(&alone, off), None, "the stripped library alone does not name it");
    let named = s.name_split(&alone, off, &found, va + size / 2).unwrap();
    assert_eq!(named.iter().rfind(|f| !f.inlined).unwrap().function, "hidden_work", "{named:?}");
    assert!(named.iter().any(|f| f.source().is_some_and(|s| s.starts_with("lib.c:"))), "{named:?}");
    // Another file under the debug file's name: its CRC differs, it is not used.
    std::fs::write(&dbg, b"not the debug file").unwrap();
    assert!(debug_file_of(&search, &so).is_none());
}

/// A debuginfod client's cache on disk (`BUILDID/debuginfo`, as `debuginfod-find` leaves it):
/// a stripped library with no debug link, its debug file found there by build id.
#[test]
fn a_debuginfod_cache_names_a_stripped_librarys_static_functions() {
    let test = "a_debuginfod_cache_names_a_stripped_librarys_static_functions";
    let tmp = tempfile::tempdir().unwrap();
    let Some((so, dbg)) = split_library(test, tmp.path(), "cached_work", "-Wl,--build-id", false) else { return };
    let info = BinaryInfo::read(&std::fs::File::open(&so).unwrap()).unwrap();
    assert!(info.link.is_none(), "no debug link: only the build id leads to the debug file");
    let id = latscope_stacks::elf::hex(info.build_id.as_deref().unwrap());
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(cache.join(&id)).unwrap();
    std::fs::rename(&dbg, cache.join(&id).join("debuginfo")).unwrap();
    let search = DebugSearch { dirs: vec![tmp.path().join("no-debug-dir")], debuginfod: vec![cache.clone()] };
    let (found, _) = debug_file_of(&search, &so).expect("the debug file in the cache");
    assert_eq!(found, cache.join(&id).join("debuginfo"));
    let (va, size) = nm_symbol(&found, "cached_work").expect("cached_work in the debug file");
    let mut s = Symbols::new();
    let off = offset_of(&so, va + size / 2);
    assert_eq!(s.name(&so, off), None, "the stripped library alone does not name it");
    let named = s.name_split(&so, off, &found, va + size / 2).unwrap();
    assert_eq!(named.iter().rfind(|f| !f.inlined).unwrap().function, "cached_work", "{named:?}");
}
