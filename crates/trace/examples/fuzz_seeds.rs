//! Writes the trace reader's fuzz seeds (`fuzz/seeds/trace_read`): the seed trace as arbitrary
//! bytes and as simple mutation programs.
//! cargo run -p latscope-trace --example fuzz_seeds -- fuzz/seeds/trace_read
fn main() {
    let dir = std::path::Path::new(&std::env::args().nth(1).unwrap()).to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let (seed, _) = latscope_trace::fuzz_support::seed_trace();
    let mut raw = vec![0u8];
    raw.extend_from_slice(seed);
    std::fs::write(dir.join("raw_trace"), &raw).unwrap();
    let mut proj = vec![0x0cu8];
    proj.extend_from_slice(seed);
    std::fs::write(dir.join("raw_trace_projected"), &proj).unwrap();
    let progs: Vec<(&str, Vec<u8>)> = vec![
        ("mut_none", vec![1]),
        ("mut_flip_block", [vec![1, 0], 700u32.to_le_bytes().to_vec(), vec![3]].concat()),
        ("mut_cut_block", [vec![1, 1], 900u32.to_le_bytes().to_vec()].concat()),
        (
            "mut_overwrite_len",
            [vec![1, 2], 604u32.to_le_bytes().to_vec(), 0x7fff_fff8u32.to_le_bytes().to_vec()].concat(),
        ),
        ("mut_insert", [vec![1, 3], 650u32.to_le_bytes().to_vec(), vec![4, 0xff, 0xff, 0xff, 0xff]].concat()),
        ("mut_splice", vec![1, 4, 3, 1]),
        ("mut_dup", vec![0x83, 5, 2, 2]),
        ("mut_delete", vec![1, 6, 1, 0]),
        ("mut_swap", vec![0x19, 7, 1, 3]),
        ("mut_delete_header", vec![1, 6, 0, 0]),
    ];
    for (n, p) in progs {
        std::fs::write(dir.join(n), p).unwrap();
    }
}
