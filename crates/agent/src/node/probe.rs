//! Reading a node's GPUs through NVML, bounded in time.
//!
//! NVML calls can hang (a wedged GPU, a stuck driver), and the agent runs as slurmd's
//! HealthCheckProgram, so nothing here may block without bound. All NVML work runs on worker
//! threads: one for `nvmlInit`, then one per GPU (identity, health counters, telemetry, NVLinks), one for
//! XID events and one for PCIe levels. They report through a channel; the caller waits until
//! everything arrived or the deadline passed. What did not arrive in time becomes evidence of a
//! timeout for exactly the GPUs it concerns (`unknown`/`nvml_timeout`), and a hung thread is
//! simply abandoned: the process exits soon after, which ends it.
//!
//! The `Nvml` handle is leaked on purpose: a worker may still be inside a call when the caller
//! returns, so the library must never be shut down or unloaded under it (and nvml-wrapper's
//! `Drop` would call `nvmlShutdown` with `.expect()`).

mod telemetry;
mod xids;

use xids::{read_migs, read_xids};

use super::nvml_raw::{self, RemoteKind};
use gputopo_core::health::{Evidence, Reading, Reason, RowRemap};
use gputopo_core::topology::PcieLevel;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, TopologyLevel};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::ffi::OsString;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// NVLink ports NVML may report per GPU.
const MAX_LINKS: u32 = 18;

/// A GPU's identity as NVML reports it (`None` where the query failed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// UUID.
    pub uuid: Option<String>,
    /// PCI bus id (`00000000:06:00.0`).
    pub bus_id: Option<String>,
    /// Device minor number (`/dev/nvidiaN`).
    pub minor: Option<u32>,
    /// Product name.
    pub name: Option<String>,
    /// CPU affinity.
    pub cores: Vec<u32>,
    /// Total memory, bytes (capability labels).
    pub mem_bytes: Option<u64>,
    /// CUDA compute capability (major, minor).
    pub cc: Option<(u32, u32)>,
    /// NVLink fabric (cluster UUID in hex, clique id), when registered with one.
    pub fabric: Option<(String, u32)>,
    /// MIG devices when MIG is enabled, by MIG index: (GPU instance, compute instance, name).
    pub migs: Vec<(u32, u32, Option<String>)>,
}

/// One end of an active NVLink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEnd {
    /// The remote device's PCI bus id.
    pub remote_bus: String,
    /// What the remote device is.
    pub kind: RemoteKind,
}

/// Everything read from one GPU, by NVML index.
#[derive(Clone, Debug, Default)]
pub struct GpuReading {
    /// Identity.
    pub ident: Identity,
    /// Health evidence (with `timed_out`/`lost` set as observed).
    pub evidence: Evidence,
    /// Active NVLinks; `None` when unknown (not read, lost, timed out).
    pub links: Option<Vec<LinkEnd>>,
}

/// The whole node, by NVML index.
#[derive(Clone, Debug, Default)]
pub struct NodeReading {
    /// Node-level failure: NVML unavailable, driver not loaded, init timed out (with detail).
    pub failure: Option<(Reason, String)>,
    /// NVML failed to start because there is no library to load: nothing is known about the
    /// GPUs, unlike a driver that is not loaded or an init that fails (the GPUs are gone).
    pub library_missing: bool,
    /// GPUs in NVML order.
    pub gpus: Vec<GpuReading>,
    /// `n`×`n` PCIe levels in NVML order; `None` where unknown.
    pub pcie: Vec<Option<PcieLevel>>,
}

impl NodeReading {
    /// True when every GPU's topology (links and PCIe levels) is known.
    pub fn topology_complete(&self) -> bool {
        self.failure.is_none()
            && !self.gpus.is_empty()
            && self
                .gpus
                .iter()
                .all(|g| g.links.is_some() && g.ident.bus_id.is_some())
            && self.pcie.iter().enumerate().all(|(k, l)| {
                let n = self.gpus.len();
                k / n == k % n || l.is_some()
            })
    }
}

/// What to read and how long to wait.
#[derive(Clone, Debug)]
pub struct Request {
    /// NVML library path or soname.
    pub library: OsString,
    /// Deadline for everything.
    pub timeout: Duration,
    /// How long to wait for XID events (0 = do not register).
    pub xid_wait: Duration,
    /// Also read NVLinks and PCIe levels.
    pub topology: bool,
    /// Service mode: stop waiting for XIDs shortly after the first one arrives (so it is
    /// published at once), and keep one NVML handle for the life of the process.
    pub listen: bool,
}

/// The NVML handle a service keeps between checks (leaked on purpose, as every handle here).
static KEPT: std::sync::Mutex<Option<(OsString, &'static Nvml)>> = std::sync::Mutex::new(None);

enum Msg {
    Ident(usize, Identity),
    Health(usize, Box<Evidence>),
    Links(usize, Option<Vec<LinkEnd>>),
    Xids(Vec<(Reading<Vec<u32>>, bool)>),
    Pcie(Vec<Option<PcieLevel>>),
}

/// Reads the node. Never blocks past `req.timeout` (plus thread start-up).
pub fn read(req: &Request) -> NodeReading {
    let deadline = Instant::now() + req.timeout;
    let (tx, rx) = mpsc::channel();
    let lib = req.library.clone();
    let kept = req
        .listen
        .then(|| KEPT.lock().ok().and_then(|k| k.clone()))
        .flatten()
        .filter(|(l, _)| *l == lib)
        .map(|(_, n)| n);
    let listen = req.listen;
    std::thread::spawn(move || {
        let r = match kept {
            Some(nvml) => Ok(nvml),
            None => Nvml::builder()
                .lib_path(&lib)
                .init()
                .map(|nvml| &*Box::leak(Box::new(nvml))),
        }
        .map(|nvml: &'static Nvml| {
            let count = nvml.device_count();
            if listen && count.is_ok() {
                if let Ok(mut k) = KEPT.lock() {
                    *k = Some((lib.clone(), nvml));
                }
            } else if listen {
                // A handle that no longer counts devices (driver reloaded) is not reused.
                if let Ok(mut k) = KEPT.lock() {
                    *k = None;
                }
            }
            (nvml, count)
        });
        let _ = tx.send(r);
    });
    let wait = deadline.saturating_duration_since(Instant::now());
    let (nvml, count) = match rx.recv_timeout(wait) {
        Err(_) => {
            return failed(
                Reason::NvmlTimeout,
                "nvmlInit did not return in time".into(),
            );
        }
        Ok(Err(e)) => {
            return NodeReading {
                library_missing: matches!(
                    e,
                    NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound
                ),
                ..failed(init_reason(&e), e.to_string())
            };
        }
        Ok(Ok((nvml, Ok(n)))) => (nvml, n as usize),
        Ok(Ok((_, Err(e)))) => {
            return failed(Reason::NvmlUnavailable, format!("nvmlDeviceGetCount: {e}"));
        }
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    for i in 0..count {
        let tx = tx.clone();
        let topo = req.topology;
        std::thread::spawn(move || read_gpu(nvml, i, topo, &tx));
    }
    let mut expected = 2 * count;
    if !req.xid_wait.is_zero() {
        expected += 1;
        let tx = tx.clone();
        let w = req.xid_wait;
        std::thread::spawn(move || {
            let _ = tx.send(Msg::Xids(read_xids(nvml, count, w, listen)));
        });
    }
    if req.topology {
        expected += count + 1;
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Msg::Pcie(read_pcie(nvml, count)));
        });
    }
    drop(tx);

    let mut gpus = vec![GpuReading::default(); count];
    let mut got_health = vec![false; count];
    let mut xids: Option<Vec<(Reading<Vec<u32>>, bool)>> = None;
    let mut pcie = vec![None; count * count];
    for _ in 0..expected {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(msg) = rx.recv_timeout(left) else {
            break;
        };
        match msg {
            Msg::Ident(i, id) => gpus[i].ident = id,
            Msg::Health(i, e) => {
                let lost = gpus[i].evidence.lost;
                gpus[i].evidence = *e;
                gpus[i].evidence.lost |= lost;
                got_health[i] = true;
            }
            Msg::Links(i, l) => gpus[i].links = l,
            Msg::Xids(x) => xids = Some(x),
            Msg::Pcie(p) => pcie = p,
        }
    }
    for (i, g) in gpus.iter_mut().enumerate() {
        if !got_health[i] {
            g.evidence.timed_out = true;
        }
        match &xids {
            Some(x) => {
                let (r, lost) = x[i].clone();
                g.evidence.xids = r;
                g.evidence.lost |= lost;
            }
            None if req.xid_wait.is_zero() => g.evidence.xids = Reading::NotSupported,
            None => g.evidence.timed_out = true,
        }
    }
    NodeReading {
        failure: None,
        library_missing: false,
        gpus,
        pcie,
    }
}

fn failed(r: Reason, detail: String) -> NodeReading {
    NodeReading {
        failure: Some((r, detail)),
        ..NodeReading::default()
    }
}

fn init_reason(e: &NvmlError) -> Reason {
    match e {
        NvmlError::DriverNotLoaded => Reason::DriverNotLoaded,
        _ => Reason::NvmlUnavailable,
    }
}

/// Turns an NVML answer into a reading, noting a lost GPU.
fn reading<T>(r: Result<T, NvmlError>, lost: &mut bool) -> Reading<T> {
    match r {
        Ok(v) => Reading::Value(v),
        Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Reading::NotSupported,
        Err(NvmlError::GpuLost) => {
            *lost = true;
            Reading::Failed("GPU is lost".into())
        }
        Err(e) => Reading::Failed(e.to_string()),
    }
}

fn value<T>(r: Result<T, NvmlError>, lost: &mut bool) -> Option<T> {
    match reading(r, lost) {
        Reading::Value(v) => Some(v),
        _ => None,
    }
}

fn read_gpu(nvml: &'static Nvml, i: usize, topo: bool, tx: &mpsc::Sender<Msg>) {
    let mut lost = false;
    let dev = match nvml.device_by_index(i as u32) {
        Ok(d) => d,
        Err(e) => {
            let msg = e.to_string();
            let lost = matches!(e, NvmlError::GpuLost);
            let _ = tx.send(Msg::Ident(i, Identity::default()));
            let _ = tx.send(Msg::Health(
                i,
                Box::new(Evidence {
                    lost,
                    ecc_enabled: Reading::Failed(msg.clone()),
                    ecc_uncorrected_volatile: Reading::Failed(msg.clone()),
                    ecc_uncorrected_aggregate: Reading::Failed(msg.clone()),
                    ecc_corrected_volatile: Reading::Failed(msg.clone()),
                    retired_pages_pending: Reading::Failed(msg.clone()),
                    row_remap: Reading::Failed(msg),
                    ..Evidence::default()
                }),
            ));
            if topo {
                let _ = tx.send(Msg::Links(i, None));
            }
            return;
        }
    };
    let ident = Identity {
        uuid: value(dev.uuid(), &mut lost),
        bus_id: value(dev.pci_info().map(|p| p.bus_id), &mut lost),
        minor: value(dev.minor_number(), &mut lost),
        name: value(dev.name(), &mut lost),
        cores: value(dev.cpu_affinity(16), &mut lost)
            .map(|w| cores(&w))
            .unwrap_or_default(),
        mem_bytes: value(dev.memory_info().map(|m| m.total), &mut lost),
        cc: value(
            dev.cuda_compute_capability()
                .map(|c| (c.major.max(0) as u32, c.minor.max(0) as u32)),
            &mut lost,
        ),
        fabric: value(nvml_raw::fabric_info(nvml, &dev), &mut lost).flatten(),
        migs: read_migs(nvml, &dev, &mut lost),
    };
    let _ = tx.send(Msg::Ident(i, ident));
    let ecc = |t, c| dev.total_ecc_errors(t, c);
    let mut e = Evidence {
        ecc_enabled: reading(dev.is_ecc_enabled().map(|m| m.currently_enabled), &mut lost),
        ..Evidence::default()
    };
    if e.ecc_enabled.value() == Some(&true) {
        e.ecc_uncorrected_volatile = reading(
            ecc(MemoryError::Uncorrected, EccCounter::Volatile),
            &mut lost,
        );
        e.ecc_uncorrected_aggregate = reading(
            ecc(MemoryError::Uncorrected, EccCounter::Aggregate),
            &mut lost,
        );
        e.ecc_corrected_volatile =
            reading(ecc(MemoryError::Corrected, EccCounter::Volatile), &mut lost);
    }
    e.retired_pages_pending = reading(dev.are_pages_pending_retired(), &mut lost);
    e.row_remap = reading(
        nvml_raw::remapped_rows(nvml, &dev).map(|(c, u, p, f)| RowRemap {
            correctable: c,
            uncorrectable: u,
            pending: p,
            failure: f,
        }),
        &mut lost,
    );
    e.telemetry = telemetry::read(&dev, &mut lost);
    e.lost = lost;
    let _ = tx.send(Msg::Health(i, Box::new(e)));
    if topo {
        let _ = tx.send(Msg::Links(
            i,
            if lost { None } else { read_links(nvml, &dev) },
        ));
    }
}

fn cores(words: &[std::ffi::c_ulong]) -> Vec<u32> {
    let bits = std::ffi::c_ulong::BITS;
    let mut out = Vec::new();
    for (w, &word) in words.iter().enumerate() {
        for b in 0..bits {
            if word & (1 << b) != 0 {
                out.push(w as u32 * bits + b);
            }
        }
    }
    out
}

/// Active NVLinks of one GPU; `Some(empty)` on GPUs without NVLink.
fn read_links(nvml: &Nvml, dev: &Device<'_>) -> Option<Vec<LinkEnd>> {
    let mut out = Vec::new();
    for l in active_links(dev).ok()? {
        let link = dev.link_wrapper_for(l);
        let remote_bus = link.remote_pci_info().ok()?.bus_id;
        let kind = nvml_raw::remote_device_type(nvml, dev, l).ok()?;
        out.push(LinkEnd { remote_bus, kind });
    }
    Some(out)
}

/// The NVLink ports of `dev` that are up; empty on GPUs without NVLink. A port that is wired
/// but down is left out, so it leaves the published topology too.
fn active_links(dev: &Device<'_>) -> Result<Vec<u32>, NvmlError> {
    let mut out = Vec::new();
    for l in 0..MAX_LINKS {
        match dev.link_wrapper_for(l).is_active() {
            Ok(true) => out.push(l),
            Ok(false) => {}
            Err(
                NvmlError::NotSupported | NvmlError::InvalidArg | NvmlError::FailedToLoadSymbol(_),
            ) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn read_pcie(nvml: &'static Nvml, n: usize) -> Vec<Option<PcieLevel>> {
    let mut out = vec![None; n * n];
    for a in 0..n {
        out[a * n + a] = Some(PcieLevel::SameBoard);
        for b in a + 1..n {
            let (Ok(da), Ok(db)) = (
                nvml.device_by_index(a as u32),
                nvml.device_by_index(b as u32),
            ) else {
                continue;
            };
            let l = match da.topology_common_ancestor(db) {
                Ok(TopologyLevel::Internal) => PcieLevel::SameBoard,
                Ok(TopologyLevel::Single) => PcieLevel::Pix,
                Ok(TopologyLevel::Multiple) => PcieLevel::Pxb,
                Ok(TopologyLevel::HostBridge) => PcieLevel::Phb,
                Ok(TopologyLevel::Node) => PcieLevel::Node,
                Ok(TopologyLevel::System) => PcieLevel::Sys,
                Err(_) => continue,
            };
            out[a * n + b] = Some(l);
            out[b * n + a] = Some(l);
        }
    }
    out
}
