use latscope_probe::*;
use std::time::Duration;
fn main() {
    let h = snapshot::take(vec![], latscope_event::SyscallSet::All, true, None);
    let cfg = ProbeConfig { comms: vec!["cat".into()], ..Default::default() };
    let mut p = Probe::start(&cfg, &h).unwrap_or_else(|e| panic!("{e}"));
    std::process::Command::new("cat").arg("/etc/hostname").status().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let b = p.poll(Duration::from_millis(200)).unwrap();
    for i in 0..b.len() {
        let e = b.get(i);
        println!(
            "{} {} {} fd={} t={} ret={} lat={} bytes={} off={} path={} dev={} ino={}",
            e.comm,
            e.pid,
            e.op_name(),
            e.fd,
            e.fd_kind().name(),
            e.ret,
            e.lat,
            e.bytes,
            e.off,
            e.path,
            e.dev,
            e.ino
        );
    }
    println!("{:?}", p.stats());
}
