//! `gputopo metrics`: the cluster's GPU health, drains, free-set quality and placement quality
//! for Prometheus, from what slurmctld knows (it runs `scontrol`, wherever a Slurm client
//! works; one place for the whole cluster, not one exporter per node).
//!
//! Three ways out: standard output (once), `--listen ADDR` (an HTTP endpoint, `/metrics`,
//! reading scontrol at each scrape), `--textfile PATH` (a file for node_exporter's textfile
//! collector, written atomically). The metrics are `gputopo_agent::fleet::metrics`.

use anyhow::Context;
use gputopo_agent::fleet::metrics::{Format, render};
use gputopo_agent::fleet::records::scontrol;
use gputopo_agent::fleet::view::Cluster;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Serve the metrics over HTTP at this address (`127.0.0.1:9746`, `[::]:9746`), path
    /// `/metrics`; scontrol is read at each scrape. Runs until killed.
    #[arg(long, value_name = "ADDR", conflicts_with = "textfile")]
    pub listen: Option<String>,
    /// Write the metrics to this file in Prometheus text format for node_exporter's textfile
    /// collector (a temporary file in the same directory, renamed over it), then exit.
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<PathBuf>,
    /// Format on standard output (`--listen` follows the scraper's Accept header; the
    /// textfile is always Prometheus text).
    #[arg(long, value_enum, default_value = "openmetrics")]
    pub format: Format,
    /// scontrol to run.
    #[arg(long, value_name = "PATH", default_value = "scontrol")]
    pub scontrol: String,
}

/// Runs the subcommand: exit code 0, or 1 when scontrol failed (standard output and textfile:
/// `gputopo_up 0` is still written, so a scraper sees the failure) or the address or file
/// cannot be used.
pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(addr) = &args.listen {
        return serve(addr, &args.scontrol);
    }
    let (cluster, code) = match read_cluster(&args.scontrol) {
        Ok(c) => (Some(c), 0),
        Err(e) => {
            eprintln!("gputopo metrics: {e:#}");
            (None, 1)
        }
    };
    match &args.textfile {
        Some(path) => write_atomically(path, &render(cluster, Format::Prometheus))?,
        None => print!("{}", render(cluster, args.format)),
    }
    Ok(code)
}

/// One read of the cluster: `scontrol show node -o -d` and `scontrol show job -d -o`.
fn read_cluster(scontrol_bin: &str) -> anyhow::Result<Cluster> {
    let nodes = scontrol(scontrol_bin, &["show", "node", "-o", "-d"])?;
    let jobs = scontrol(scontrol_bin, &["show", "job", "-d", "-o"])?;
    Ok(Cluster::read(&nodes, &jobs))
}

/// `text` into `path` through a temporary file renamed over it, so node_exporter never reads
/// half a file.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("writing {}: {e}", path.display())
    })
}

/// Serves `/metrics` at `addr` until the process is killed; one scrape at a time (each runs
/// scontrol twice, so concurrent scrapers queue instead of loading slurmctld in parallel).
fn serve(addr: &str, scontrol_bin: &str) -> anyhow::Result<i32> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    eprintln!(
        "gputopo metrics: serving http://{}/metrics",
        server.server_addr()
    );
    let mut last_error = String::new();
    let mut scrape = || match read_cluster(scontrol_bin) {
        Ok(c) => {
            last_error.clear();
            Some(c)
        }
        Err(e) => {
            // Logged once per distinct failure, not at every scrape.
            let msg = format!("{e:#}");
            if msg != last_error {
                eprintln!("gputopo metrics: {msg}");
                last_error = msg;
            }
            None
        }
    };
    for request in server.incoming_requests() {
        let get = matches!(
            request.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let accept = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Accept"))
            .map(|h| h.value.as_str().to_string());
        let (status, content_type, body) =
            answer(get, request.url(), accept.as_deref(), &mut scrape);
        let mut response = tiny_http::Response::from_string(body).with_status_code(status);
        if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", content_type) {
            response.add_header(h);
        }
        // A scraper that hung up is no error of ours.
        let _ = request.respond(response);
    }
    Ok(0)
}

/// The HTTP answer (status, content type, body) to a request for `url`; `scrape` reads the
/// cluster (`None` when scontrol failed).
fn answer(
    get: bool,
    url: &str,
    accept: Option<&str>,
    scrape: impl FnOnce() -> Option<Cluster>,
) -> (u16, &'static str, String) {
    const PLAIN: &str = "text/plain; charset=utf-8";
    match (get, url.split('?').next().unwrap_or("")) {
        (true, "/metrics") => {
            let format = Format::negotiate(accept);
            (200, format.content_type(), render(scrape(), format))
        }
        (false, "/metrics") => (405, PLAIN, "GET only\n".into()),
        (_, "/") => (200, PLAIN, "gputopo metrics: see /metrics\n".into()),
        _ => (404, PLAIN, "not found\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_metrics_in_the_format_asked_for() {
        let none = || None;
        let (s, ct, body) = answer(
            true,
            "/metrics",
            Some("application/openmetrics-text;version=1.0.0"),
            none,
        );
        assert_eq!((s, ct), (200, Format::OpenMetrics.content_type()));
        assert!(
            body.contains("gputopo_up 0") && body.ends_with("# EOF\n"),
            "{body}"
        );
        let (s, ct, body) = answer(true, "/metrics?x=1", Some("text/plain"), none);
        assert_eq!((s, ct), (200, Format::Prometheus.content_type()));
        assert!(
            body.contains("gputopo_up 0") && !body.contains("# EOF"),
            "{body}"
        );
        assert_eq!(answer(false, "/metrics", None, none).0, 405);
        assert_eq!(answer(true, "/", None, none).0, 200);
        assert_eq!(answer(true, "/other", None, none).0, 404);
    }

    #[test]
    fn a_textfile_is_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("gputopo-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let path = dir.join("gputopo.prom");
        write_atomically(&path, "a 1\n").expect("first write");
        write_atomically(&path, "b 2\n").expect("second write");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("b 2\n")
        );
        let left: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.count())
            .into_iter()
            .collect();
        assert_eq!(left, vec![1], "no temporary file left behind");
        assert!(write_atomically(&dir.join("no/such/dir/f"), "x").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
