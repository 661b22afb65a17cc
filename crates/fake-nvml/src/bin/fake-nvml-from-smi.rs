//! `fake-nvml-from-smi REPORT NAME [HEADER...]`: prints the fake-NVML fixture for an
//! `nvidia-smi -q -x` (XML) or `nvidia-smi -q` (text) report (see `fake_nvml::smi`); each
//! HEADER argument becomes a comment line at the top (source, commit, licence).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [report, name, header @ ..] = &args[..] else {
        eprintln!(
            "usage: fake-nvml-from-smi REPORT NAME [HEADER...] (REPORT: nvidia-smi -q -x or -q output)"
        );
        std::process::exit(2);
    };
    let run = || -> Result<String, String> {
        let text = std::fs::read_to_string(report).map_err(|e| format!("{report}: {e}"))?;
        let fx = fake_nvml::smi::from_report(&text, name, header)
            .map_err(|e| format!("{report}: {e}"))?;
        fake_nvml::fixture::parse(&fx)
            .map_err(|e| format!("{report}: the fixture does not parse: {e}"))?;
        Ok(fx)
    };
    match run() {
        Ok(fx) => print!("{fx}"),
        Err(e) => {
            eprintln!("fake-nvml-from-smi: {e}");
            std::process::exit(1);
        }
    }
}
