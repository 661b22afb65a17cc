//! Each node's last good health kept in `StateSaveLocation` (issue 25 item 1), for slurmctld.
//! The format, bounds and crash-safe file are [`gputopo_core::health::persist`]'s; this module
//! decides when the file is read and written.
//!
//! - **Remembered** as the hooks read it: `SteerState::node_health` hands over
//!   each `Extra` that parsed ([`remember`]) and each reset to empty ([`forget`]); nothing is
//!   written there (slurmctld's locks are held).
//! - **Written** by the plugin's own thread (`gputopo-health`), never under a slurmctld lock:
//!   it waits for a change, lets more gather for [`DEBOUNCE`], copies the store under this
//!   module's lock and writes the copy after releasing it. Production slurmctld never calls
//!   the select plugin's `fini`, so a change reaches the disk within about [`DEBOUNCE`].
//! - **Read back** when the role starts in slurmctld (`select_g_init`, no lock held: every
//!   restart, and 24.11's reconfigure, which re-executes slurmctld) and after every
//!   `select_p_reconfigure` (22.05's reconfigure in the same process, and a backup's takeover:
//!   `read_slurm_conf` runs it under the config write lock, so the thread reads the file).
//!   A file this process did not write last was written by the other controller while it was
//!   in control, so it is newer than anything this process remembers: the store becomes the
//!   file, and the next job_test ([`take`]: the thread touches nothing of the hooks) starts the
//!   health cache over seeded from it and rebuilds the models. A file unchanged since this
//!   process read or wrote it changes nothing.
//! - **Fail closed in between**: from a reconfigure until the hooks have what the thread found,
//!   and while the file cannot be read at all, a node whose `Extra` is unusable is withheld
//!   ([`read_back`]), whatever this process remembers of it (it may be a standby's stale view).
//! - **Fail closed after a corrupt file**: a file that does not parse is set aside (kept as
//!   evidence) and what it held is lost ([`ReadBack::Lost`]): a node whose `Extra` is unusable
//!   and whose good health this process has not seen since is withheld, and saved so (every
//!   GPU faulty) until its `Extra` is good again, so a restart or takeover withholds it too.
//! - A backup in standby runs no job_test, so it never writes: the primary's file stays.
//!
//! Outside slurmctld [`start`] is never called and [`read_back`] says [`ReadBack::Done`].

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use gputopo_core::health::persist::{self, HEALTH_FILE, HealthStore};
use gputopo_core::health::{Parsed, read_extra};

/// How long the writer lets changes gather before it writes.
pub const DEBOUNCE: Duration = Duration::from_secs(1);

/// Whether the persisted health is in the health cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBack {
    /// Read (or nothing to read: not slurmctld, no `StateSaveLocation`).
    Done,
    /// A reconfigure asked for a fresh look that the thread has not finished, or the hooks
    /// have not taken what it found yet.
    Pending,
    /// The file exists but cannot be read (or, corrupt, cannot be set aside).
    Failed,
    /// Read, but the file was corrupt and set aside: the last good health it held is lost, so
    /// a node whose `Extra` is unusable and whose good health this process has not seen is
    /// withheld. Written as usual. Ends when a good file of the other controller is read.
    Lost,
}

#[derive(Debug)]
struct Inner {
    /// `StateSaveLocation` and `SlurmUser`'s uid, read where `slurm_conf` may be read;
    /// `None` outside slurmctld.
    dir: Option<PathBuf>,
    owner: u32,
    /// Every node's last good `Extra`.
    store: HealthStore,
    read_back: ReadBack,
    /// The file was corrupt when last read and set aside ([`ReadBack::Lost`]).
    lost: bool,
    /// A node was withheld while [`ReadBack`] was not done: its model must be rebuilt.
    withheld: bool,
    dirty: bool,
    reload: bool,
    /// The file as this process last read or wrote it (modified time, length).
    seen: Option<(SystemTime, u64)>,
    /// Nodes whose record could not be kept (logged once each).
    not_kept: HashSet<String>,
    /// Updates for the hooks: made, taken, and the seeds of the last file read not taken yet.
    generation: u64,
    applied: u64,
    seeds: Option<Vec<(String, Arc<Parsed>)>>,
    /// The last write error logged (one line per distinct error until a write succeeds).
    write_error: Option<String>,
}

#[derive(Debug)]
struct Persist {
    inner: Mutex<Inner>,
    wake: Condvar,
}

static PERSIST: LazyLock<Persist> = LazyLock::new(|| Persist {
    inner: Mutex::new(Inner {
        dir: None,
        owner: 0,
        store: HealthStore::new(),
        read_back: ReadBack::Done,
        lost: false,
        withheld: false,
        dirty: false,
        reload: false,
        seen: None,
        not_kept: HashSet::new(),
        write_error: None,
        generation: 0,
        applied: 0,
        seeds: None,
    }),
    wake: Condvar::new(),
});

fn lock() -> MutexGuard<'static, Inner> {
    PERSIST.inner.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Reads `StateSaveLocation` and `SlurmUser` from `slurm_conf` (callers hold no lock of
/// Slurm's config, or the write lock).
fn configure(g: &mut Inner) {
    g.dir = crate::slurm::conf::state_save_location();
    g.owner = crate::slurm::conf::slurm_user_id();
}

/// The select role's start in slurmctld (`select_g_init`: no slurmctld lock is held, so the
/// file is read here, for the first job_test to take) and starts the writer thread.
pub fn start() {
    configure(&mut lock());
    read_file();
    static THREAD: OnceLock<bool> = OnceLock::new();
    let started = THREAD.get_or_init(|| {
        std::thread::Builder::new()
            .name("gputopo-health".into())
            .spawn(writer)
            .map_err(|e| {
                log::error!("cannot start the thread that saves GPU health: {e}; it is not kept across restarts");
            })
            .is_ok()
    });
    if !started {
        lock().dir = None;
    }
}

/// The select role's stop: writes what is not written yet (no slurmctld lock is held).
pub fn stop() {
    let out = {
        let mut g = lock();
        std::mem::take(&mut g.dirty).then(|| snapshot(&g)).flatten()
    };
    if let Some(out) = out {
        write(out);
    }
}

/// `select_p_reconfigure` (slurmctld's config write lock held: `slurm_conf` is read here, the
/// file is not). The thread looks at the file again; until it has, nodes whose `Extra` is
/// unusable are withheld.
pub fn reconfigure() {
    let mut g = lock();
    if g.dir.is_none() {
        return; // not started: not slurmctld, or no StateSaveLocation
    }
    configure(&mut g);
    g.read_back = ReadBack::Pending;
    g.reload = true;
    PERSIST.wake.notify_one();
}

/// Keeps `extra`, which parsed, as `node`'s last good health.
pub fn remember(node: &str, extra: &str) {
    let mut g = lock();
    if g.dir.is_none() {
        return;
    }
    match g.store.remember(node, extra, now()) {
        Ok(changed) => {
            g.not_kept.remove(node);
            if changed {
                g.dirty = true;
                PERSIST.wake.notify_one();
            }
        }
        Err(e) => {
            if g.not_kept.insert(node.to_string()) {
                log::warn!("node {node}: its GPU health is not kept across restarts: {e}");
            }
        }
    }
}

/// `node`'s `Extra` was reset to empty: its record goes too.
pub fn forget(node: &str) {
    let mut g = lock();
    if g.dir.is_some() && g.store.forget(node) {
        g.dirty = true;
        PERSIST.wake.notify_one();
    }
}

/// Whether a node whose `Extra` is unusable may use what this process remembers of it
/// (`Done`; `Lost`: only if that is any) or must be withheld: not while the file is unread,
/// nor while an update waits for the hooks ([`take`]). A node withheld then has its model
/// rebuilt once the file is read.
pub fn read_back() -> ReadBack {
    let mut g = lock();
    let state = match g.read_back {
        ReadBack::Done if g.applied != g.generation => ReadBack::Pending,
        ReadBack::Done if g.lost => ReadBack::Lost,
        other => other,
    };
    if matches!(state, ReadBack::Pending | ReadBack::Failed) {
        g.withheld = true;
    }
    state
}

/// The writer thread: looks at the file when asked, writes it when the store changed.
fn writer() {
    loop {
        let mut g = lock();
        while !g.dirty && !g.reload {
            g = PERSIST.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        if std::mem::take(&mut g.reload) {
            drop(g);
            read_file();
            continue;
        }
        drop(g);
        std::thread::sleep(DEBOUNCE);
        let out = {
            let mut g = lock();
            if g.reload {
                continue; // look at the file first: another controller may have written it
            }
            g.dirty = false;
            snapshot(&g)
        };
        if let Some(out) = out {
            write(out);
        }
    }
}

/// What one write needs, copied under the lock.
struct Out {
    dir: PathBuf,
    owner: u32,
    text: String,
}

/// The store's text, unless writing is off (no directory, or a file that could not be read:
/// writing would replace it).
fn snapshot(g: &Inner) -> Option<Out> {
    let dir = g.dir.clone()?;
    (g.read_back != ReadBack::Failed).then(|| Out {
        dir,
        owner: g.owner,
        text: g.store.to_json(),
    })
}

fn write(out: Out) {
    let result = persist::write(&out.dir, &out.text, Some(out.owner));
    let mut g = lock();
    match result {
        Ok(()) => {
            g.seen = file_signature(&out.dir);
            if g.write_error.take().is_some() {
                log::info!("GPU health is saved again in {}", out.dir.display());
            }
        }
        Err(e) => {
            let text = e.to_string();
            if g.write_error.as_deref() != Some(text.as_str()) {
                log::error!("{text}; GPU health stays in memory and is saved on the next change");
                g.write_error = Some(text);
            }
        }
    }
}

fn file_signature(dir: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(dir.join(HEALTH_FILE)).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Looks at the file (with no slurmctld lock held) and reads it unless this process read or
/// wrote it last. A missing file, or a corrupt one (set aside), replaces nothing: what this
/// process remembers is written instead.
fn read_file() {
    let dir = lock().dir.clone();
    let Some(dir) = dir else {
        finish(ReadBack::Done, Look::Unchanged);
        return;
    };
    let signature = file_signature(&dir);
    let unchanged = {
        let g = lock();
        g.read_back != ReadBack::Failed && g.seen.is_some() && g.seen == signature
    };
    if unchanged {
        finish(ReadBack::Done, Look::Unchanged);
        return;
    }
    let loaded = match persist::load(&dir, now()) {
        Ok(l) => l,
        Err(e) => {
            log::error!(
                "{e}; nodes whose Extra is unusable are withheld, and the file is not written, until it can be read"
            );
            finish(ReadBack::Failed, Look::Unchanged);
            return;
        }
    };
    for p in &loaded.problems {
        log::error!("persisted GPU health: {p}");
    }
    if let Some((aside, why)) = &loaded.set_aside {
        log::error!(
            "persisted GPU health was corrupt ({why}); moved to {}; the health this slurmctld read itself is saved in its place, and nodes whose Extra is unusable are withheld until it is good again",
            aside.display()
        );
        finish(ReadBack::Done, Look::Corrupt);
    } else if signature.is_none() {
        finish(ReadBack::Done, Look::Missing);
    } else {
        log::info!(
            "read back the last good GPU health of {} node(s) from {}",
            loaded.store.len(),
            dir.join(HEALTH_FILE).display()
        );
        finish(ReadBack::Done, Look::Read(loaded.store, signature));
    }
}

/// What a look at the file found.
enum Look {
    /// As this process last read or wrote it (or not looked at).
    Unchanged,
    /// No file: what this process remembers is written.
    Missing,
    /// A corrupt file, set aside: as `Missing`, and what it held is lost ([`ReadBack::Lost`]).
    Corrupt,
    /// Written by another controller (or first read): it replaces what this process
    /// remembers.
    Read(HealthStore, Option<(SystemTime, u64)>),
}

/// Installs a look at the file (a read: parsed here, with no lock held). A read replaces the
/// store and hands its records to the hooks as seeds ([`take`]); a read, or nodes withheld
/// meanwhile, make the hooks drop their models.
fn finish(read_back: ReadBack, look: Look) {
    let seeds = match &look {
        Look::Read(store, _) => Some(
            store
                .iter()
                .filter_map(|(node, saved)| {
                    let parsed = read_extra(&saved.extra).ok().flatten()?;
                    Some((node.to_string(), Arc::new(parsed)))
                })
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    let mut g = lock();
    match look {
        Look::Unchanged => {}
        Look::Missing | Look::Corrupt => {
            g.lost |= matches!(look, Look::Corrupt);
            g.seen = None;
            g.dirty |= !g.store.is_empty();
            if g.dirty {
                PERSIST.wake.notify_one();
            }
        }
        Look::Read(store, signature) => {
            g.lost = false;
            g.store = store;
            g.seen = signature;
            g.dirty = false;
        }
    }
    let withheld = read_back == ReadBack::Done && std::mem::take(&mut g.withheld);
    if seeds.is_some() || withheld {
        g.seeds = seeds.or(g.seeds.take());
        g.generation += 1;
        GENERATION.store(g.generation, Ordering::Release);
    }
    g.read_back = read_back;
}

/// What the hooks must apply ([`take`]).
#[derive(Debug)]
pub struct Update {
    /// The health cache starts over from these (a file read), when given.
    pub seeds: Option<Vec<(String, Arc<Parsed>)>>,
}

/// Bumped by every update for the hooks (a cheap check on every call, [`pending`]).
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The last update the hooks took.
static APPLIED: AtomicU64 = AtomicU64::new(0);

/// True when an update waits for the hooks ([`take`]): one atomic comparison.
pub fn pending() -> bool {
    GENERATION.load(Ordering::Acquire) != APPLIED.load(Ordering::Acquire)
}

/// The update waiting for the hooks, if any; the caller (a job_test, under slurmctld's locks,
/// where no file is read) reseeds the health cache with its seeds and drops the models.
pub fn take() -> Option<Update> {
    let mut g = lock();
    if g.applied == g.generation {
        return None;
    }
    g.applied = g.generation;
    APPLIED.store(g.applied, Ordering::Release);
    Some(Update {
        seeds: g.seeds.take(),
    })
}

#[cfg(test)]
mod tests;
