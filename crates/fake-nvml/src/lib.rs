//! A fake `libnvidia-ml.so`: exports the NVML C symbols that nvml-wrapper (and gputopo's raw
//! calls) use, answering from a fixture file named by `FAKE_NVML_FIXTURE` (format: [`fixture`]).
//!
//! Why: the node agent must be tested through the real nvml-wrapper code path, with faults that
//! no healthy lab GPU can produce on demand (uncorrectable ECC, a lost GPU, a hanging call, XIDs,
//! NVSwitch links). Point the agent at this library with `GPUTOPO_NVML_LIB` or `NvmlLibrary=`.
//!
//! It must export `nvmlShutdown` and `nvmlEventSetFree`: nvml-wrapper's `Drop` impls call them
//! through `.expect()`, so a library without them panics on drop.
//!
//! Behaviour: device handles are small non-null integers (index + 1); a lost GPU answers every
//! call with `NVML_ERROR_GPU_IS_LOST` (15), including `nvmlDeviceGetHandleByIndex_v2`, as the
//! real driver does; `HangMs` makes one named call sleep; XIDs are queued when a device
//! registers for XID events and delivered once each by `nvmlEventSetWait_v2`. Every export runs
//! under `catch_unwind` and answers `NVML_ERROR_UNKNOWN` (999) instead of unwinding into C.

mod capability;
mod clocks;
mod events;
mod fabric;
pub mod fixture;
mod health;
mod mig;
pub mod smi;
mod telemetry;
mod topology;
pub mod tree;

use fixture::{FakeGpu, FakeNode};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_st, nvmlDevice_t, nvmlEccCounterType_t, nvmlEnableState_t, nvmlEventData_t,
    nvmlEventSet_st, nvmlEventSet_t, nvmlGpuTopologyLevel_t, nvmlIntNvLinkDeviceType_t,
    nvmlMemoryErrorType_t, nvmlPageRetirementCause_t, nvmlPciInfo_t, nvmlReturn_t,
};
use std::collections::VecDeque;
use std::ffi::{c_char, c_uint, c_ulong, c_ulonglong};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

const SUCCESS: nvmlReturn_t = 0;
const UNINITIALIZED: nvmlReturn_t = 1;
const INVALID_ARGUMENT: nvmlReturn_t = 2;
const NOT_SUPPORTED: nvmlReturn_t = 3;
const NOT_FOUND: nvmlReturn_t = 6;
const INSUFFICIENT_SIZE: nvmlReturn_t = 7;
const DRIVER_NOT_LOADED: nvmlReturn_t = 9;
const TIMEOUT: nvmlReturn_t = 10;
const LIBRARY_NOT_FOUND: nvmlReturn_t = 12;
const GPU_IS_LOST: nvmlReturn_t = 15;
const UNKNOWN: nvmlReturn_t = 999;

/// `nvmlEventTypeXidCriticalError`.
const EVENT_XID: c_ulonglong = 8;
/// Single- and double-bit ECC event bits, advertised as supported.
const EVENT_ECC: c_ulonglong = 1 | 2;

type Rc = Result<(), nvmlReturn_t>;

static NODE: OnceLock<Result<FakeNode, String>> = OnceLock::new();
static INIT_COUNT: AtomicUsize = AtomicUsize::new(0);
static CALLS: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];
/// Event sets by handle - 1: queued (GPU index, XID) pairs; `None` once freed.
type EventSets = Vec<Option<VecDeque<(usize, u64)>>>;
static SETS: Mutex<EventSets> = Mutex::new(Vec::new());

fn load() -> &'static Result<FakeNode, String> {
    NODE.get_or_init(|| {
        let path = std::env::var("FAKE_NVML_FIXTURE")
            .map_err(|_| "FAKE_NVML_FIXTURE is not set".to_string())?;
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        fixture::parse(&text).map_err(|e| format!("{path}: {e}"))
    })
}

fn node() -> Result<&'static FakeNode, nvmlReturn_t> {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return Err(UNINITIALIZED);
    }
    load().as_ref().map_err(|_| UNINITIALIZED)
}

fn handle(i: usize) -> nvmlDevice_t {
    std::ptr::without_provenance_mut::<nvmlDevice_st>(i + 1)
}

/// The GPU behind a handle, applying the lost / lost-after / hang behaviour of `call`.
fn gpu_at(h: nvmlDevice_t, call: &str) -> Result<(usize, &'static FakeGpu), nvmlReturn_t> {
    let n = node()?;
    let i = (h as usize).checked_sub(1).ok_or(INVALID_ARGUMENT)?;
    let g = n.gpus.get(i).ok_or(INVALID_ARGUMENT)?;
    enter(i, g, call)?;
    Ok((i, g))
}

fn enter(i: usize, g: &FakeGpu, call: &str) -> Rc {
    if g.lost {
        return Err(GPU_IS_LOST);
    }
    if let Some(after) = g.lost_after {
        let done = CALLS.get(i).map_or(0, |c| c.fetch_add(1, Ordering::SeqCst));
        if done >= after {
            return Err(GPU_IS_LOST);
        }
    }
    if g.hang_ms > 0 && g.hang_call == call {
        std::thread::sleep(std::time::Duration::from_millis(g.hang_ms));
    }
    Ok(())
}

/// Runs an export body, turning a panic into `NVML_ERROR_UNKNOWN`.
fn guard(f: impl FnOnce() -> Rc) -> nvmlReturn_t {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(rc)) => rc,
        Err(_) => UNKNOWN,
    }
}

/// Writes `v` through an out pointer.
///
/// # Safety
/// `p` is null or valid for a write of `T` (the NVML calling convention).
unsafe fn put<T>(p: *mut T, v: T) -> Rc {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and the caller guarantees it is valid for writes.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `s` and a NUL into a caller buffer of `len` bytes.
///
/// # Safety
/// `buf` is null or valid for `len` bytes of writes.
unsafe fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> Rc {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if s.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: `buf` holds `len` > s.len() bytes (checked above); the regions cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len()) };
    // SAFETY: index s.len() < len.
    unsafe { buf.add(s.len()).write(0) };
    Ok(())
}

fn c_array<const N: usize>(s: &str) -> [c_char; N] {
    let mut a = [0 as c_char; N];
    for (d, b) in a.iter_mut().zip(s.bytes().take(N.saturating_sub(1))) {
        *d = b as c_char;
    }
    a
}

fn pci_info(bus_id: &str) -> nvmlPciInfo_t {
    // "DDDDDDDD:BB:DD.F"
    let mut parts = bus_id.split([':', '.']);
    let mut next = || {
        parts
            .next()
            .and_then(|p| u32::from_str_radix(p, 16).ok())
            .unwrap_or(0)
    };
    let (domain, bus, device) = (next(), next(), next());
    let func = next();
    nvmlPciInfo_t {
        busIdLegacy: c_array(&format!("{domain:04X}:{bus:02X}:{device:02X}.{func:X}")),
        domain,
        bus,
        device,
        pciDeviceId: 0x1db5_10de,
        pciSubSystemId: 0x1249_10de,
        busId: c_array(bus_id),
    }
}

// ---------------------------------------------------------------- init and system

/// `nvmlInit_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    guard(|| match load() {
        Err(msg) => {
            eprintln!("fake-nvml: {msg}");
            Err(UNKNOWN)
        }
        Ok(n) if n.driver_not_loaded => Err(DRIVER_NOT_LOADED),
        Ok(n) if n.no_library => Err(LIBRARY_NOT_FOUND),
        Ok(_) => {
            INIT_COUNT.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
}

/// `nvmlInit`, NVML's first entry point, which newer headers map to `nvmlInit_v2`: Slurm's
/// `configure` checks for it by name (`AC_CHECK_LIB([nvidia-ml], [nvmlInit])`), as do other
/// builds that probe for libnvidia-ml.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    nvmlInit_v2()
}

/// `nvmlInitWithFlags` (flags ignored).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    nvmlInit_v2()
}

/// `nvmlShutdown`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guard(|| {
        INIT_COUNT
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1))
            .map(|_| ())
            .map_err(|_| UNINITIALIZED)
    })
}

/// `nvmlErrorString`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static std::ffi::CStr = match result {
        SUCCESS => c"Success",
        UNINITIALIZED => c"Uninitialized",
        INVALID_ARGUMENT => c"Invalid Argument",
        NOT_SUPPORTED => c"Not Supported",
        NOT_FOUND => c"Not Found",
        INSUFFICIENT_SIZE => c"Insufficient Size",
        DRIVER_NOT_LOADED => c"Driver Not Loaded",
        TIMEOUT => c"Timeout",
        GPU_IS_LOST => c"GPU is lost",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

/// `nvmlSystemGetDriverVersion`.
///
/// # Safety
/// NVML calling convention: `version` is valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // SAFETY: forwarded caller guarantee.
    guard(|| unsafe { put_str(version, length, &node()?.driver) })
}

// ---------------------------------------------------------------- enumeration

/// `nvmlDeviceGetCount_v2`.
///
/// # Safety
/// `count` is a valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: forwarded caller guarantee.
    guard(|| unsafe { put(count, node()?.gpus.len() as c_uint) })
}

/// `nvmlDeviceGetHandleByIndex_v2`.
///
/// # Safety
/// `device` is a valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let i = index as usize;
        let g = node()?.gpus.get(i).ok_or(INVALID_ARGUMENT)?;
        enter(i, g, "nvmlDeviceGetHandleByIndex_v2")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(device, handle(i)) }
    })
}

/// `nvmlDeviceGetHandleByPciBusId_v2`.
///
/// # Safety
/// `bus_id` is a NUL-terminated string; `device` a valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        if bus_id.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null and NUL-terminated by the caller's guarantee.
        let want = unsafe { std::ffi::CStr::from_ptr(bus_id) }.to_string_lossy();
        let n = node()?;
        let i = n
            .gpus
            .iter()
            .position(|g| g.bus_id.eq_ignore_ascii_case(&want))
            .ok_or(NOT_FOUND)?;
        enter(i, &n.gpus[i], "nvmlDeviceGetHandleByPciBusId_v2")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(device, handle(i)) }
    })
}

/// `nvmlDeviceGetUUID`.
///
/// # Safety
/// `uuid` is valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let text = match mig::mig_at(device, "nvmlDeviceGetUUID") {
            Some(r) => &r?.1.uuid,
            None => &device_of(device, "nvmlDeviceGetUUID")?.uuid,
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put_str(uuid, length, text) }
    })
}

/// `nvmlDeviceGetName`.
///
/// # Safety
/// `name` is valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let text = match mig::mig_at(device, "nvmlDeviceGetName") {
            Some(r) => r.map(|(g, m)| mig::mig_name(g, m))?,
            None => device_of(device, "nvmlDeviceGetName")?.name.clone(),
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put_str(name, length, &text) }
    })
}

/// `nvmlDeviceGetIndex`.
///
/// # Safety
/// `index` is a valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(
    device: nvmlDevice_t,
    index: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let (i, _) = gpu_at(device, "nvmlDeviceGetIndex")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(index, i as c_uint) }
    })
}

/// `nvmlDeviceGetPciInfo_v3`.
///
/// # Safety
/// `pci` is a valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetPciInfo_v3")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(pci, pci_info(&g.bus_id)) }
    })
}

/// `nvmlDeviceGetMinorNumber`.
///
/// # Safety
/// `minor` is a valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetMinorNumber")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(minor, g.minor) }
    })
}

/// `nvmlDeviceGetCpuAffinity`.
///
/// # Safety
/// `cpu_set` is valid for `size` words.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCpuAffinity(
    device: nvmlDevice_t,
    size: c_uint,
    cpu_set: *mut c_ulong,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetCpuAffinity")?;
        // FAKE_NVML_CPUS=N: every GPU is near CPUs 0..N-1, the host's own (contrib/nvml-node.sh
        // sets it for slurmd, which maps the affinity onto the CPUs the host really has).
        let host: Option<Vec<u32>> = std::env::var("FAKE_NVML_CPUS")
            .ok()
            .and_then(|n| n.parse::<u32>().ok())
            .map(|n| (0..n.min(4096)).collect());
        let cores = host.as_ref().unwrap_or(&g.cores);
        if cores.is_empty() {
            return Err(NOT_SUPPORTED);
        }
        let bits = c_ulong::BITS as usize;
        for w in 0..size as usize {
            let mut word: c_ulong = 0;
            for &c in cores {
                if c as usize / bits == w {
                    word |= 1 << (c as usize % bits);
                }
            }
            // SAFETY: w < size, the caller's buffer length.
            unsafe { put(cpu_set.wrapping_add(w), word)? };
        }
        Ok(())
    })
}

fn device_of(h: nvmlDevice_t, call: &str) -> Result<&'static FakeGpu, nvmlReturn_t> {
    gpu_at(h, call).map(|(_, g)| g)
}
