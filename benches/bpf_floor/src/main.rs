//! `bpf-floor OBJECT PROGRAM:TRACEPOINT...`: loads OBJECT, attaches each program to its
//! BTF-typed tracepoint, prints "ready" and sleeps until killed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((object, pairs)) = args.split_first() else {
        return Err("usage: bpf-floor OBJECT PROGRAM:TRACEPOINT...".into());
    };
    let btf = aya::Btf::from_sys_fs()?;
    let mut ebpf = aya::Ebpf::load(&std::fs::read(object)?)?;
    for pair in pairs {
        let (name, tracepoint) = pair.split_once(':').ok_or("PROGRAM:TRACEPOINT")?;
        let program: &mut aya::programs::BtfTracePoint =
            ebpf.program_mut(name).ok_or("no such program")?.try_into()?;
        program.load(tracepoint, &btf)?;
        program.attach()?;
    }
    println!("ready");
    loop {
        std::thread::park();
    }
}
