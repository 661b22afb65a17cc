//! `fake-nvml-tree FIXTURE DIR`: writes the driver's files for a fake-NVML fixture under DIR
//! (`/proc/driver`, `/sys/bus/pci/drivers` and the `/dev` nodes a node with those GPUs has;
//! see `fake_nvml::tree`), for `contrib/nvml-node.sh` to mount in a private mount namespace.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [fixture, dir] = &args[..] else {
        eprintln!("usage: fake-nvml-tree FIXTURE DIR");
        std::process::exit(2);
    };
    let run = || -> Result<(), String> {
        let text = std::fs::read_to_string(fixture).map_err(|e| format!("{fixture}: {e}"))?;
        let node = fake_nvml::fixture::parse(&text).map_err(|e| format!("{fixture}: {e}"))?;
        fake_nvml::tree::write(&node, std::path::Path::new(dir))
    };
    if let Err(e) = run() {
        eprintln!("fake-nvml-tree: {e}");
        std::process::exit(1);
    }
}
