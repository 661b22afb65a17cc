//! `gputopo health [--json]`: each GPU's verdict, in Slurm's GRES index order.
//!
//! Table columns: Slurm index, device minor, PCI bus id, UUID, verdict, reasons. With `--json`, a
//! JSON array with one object per GPU (`index`, `minor`, `bus_id`, `uuid`, `name`, `nvml_index`,
//! `status`, `reasons`), one object per line. Exit codes: see [`super`].

use super::report::{self, NodeReport};
use super::settings::Settings;

/// Arguments.
#[derive(clap::Args)]
#[command(after_help = super::report::EXIT_HELP)]
pub struct Args {
    /// Print JSON (one object per GPU) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Slurm node name (for gres.conf NodeName= lines); default $SLURMD_NODENAME or the host name.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let s = Settings::load(args.node)?;
    let r = report::collect(&s, false);
    r.print_notes();
    if args.json {
        print!("{}", json(&r));
    } else {
        print!("{}", table(&r));
    }
    Ok(r.exit_code())
}

/// The `--json` output.
pub fn json(r: &NodeReport) -> String {
    let rows: Vec<String> = r
        .gpus
        .iter()
        .map(|g| {
            // Violation counters: the share of the time since the previous check each ran
            // throttled (absent on a first check or where NVML has no counters).
            let throttled: serde_json::Map<String, serde_json::Value> = g
                .nvml
                .map(|n| {
                    r.reading.gpus[n]
                        .evidence
                        .telemetry
                        .throttled_pct
                        .as_slice()
                })
                .unwrap_or_default()
                .iter()
                .map(|(l, pct)| (l.token().to_string(), (*pct).into()))
                .collect();
            serde_json::json!({
                "index": g.verdict.index,
                "minor": g.minor,
                "bus_id": g.ident.bus_id,
                "uuid": g.ident.uuid,
                "name": g.ident.name,
                "nvml_index": g.nvml,
                "status": g.verdict.status,
                "reasons": g.verdict.reasons,
                "throttled_pct": throttled,
            })
            .to_string()
        })
        .collect();
    if rows.is_empty() {
        "[]\n".into()
    } else {
        format!("[\n{}\n]\n", rows.join(",\n"))
    }
}

/// The table output.
pub fn table(r: &NodeReport) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "{:<5} {:<5} {:<16} {:<40} {:<8} REASONS\n",
        "INDEX", "MINOR", "BUS_ID", "UUID", "STATUS"
    );
    let dash = || "-".to_string();
    for g in &r.gpus {
        let reasons: Vec<String> = g.verdict.reasons.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "{:<5} {:<5} {:<16} {:<40} {:<8} {}",
            g.verdict.index,
            g.minor.map_or_else(dash, |m| m.to_string()),
            g.ident.bus_id.clone().unwrap_or_else(dash),
            g.ident.uuid.clone().unwrap_or_else(dash),
            g.verdict.status,
            if reasons.is_empty() {
                dash()
            } else {
                reasons.join(",")
            }
        );
    }
    if let Some((reason, _)) = &r.reading.failure {
        let _ = writeln!(s, "node: {reason}");
    }
    s
}
