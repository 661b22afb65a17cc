//! Reference-counted, role-agnostic `init`/`fini`.
//!
//! One `.so` has one `init` and one `fini` symbol, but Slurm may load the same file under
//! several roles (gputopo's `select_gputopo_cons_tres.so` and `priority_gputopo.so`; dlopen
//! returns the same handle) and calls `init`/`fini` once per role, without saying which. So the first `init`
//! installs the logger and starts every [`Role`] listed in `plugin_identity!`, later ones only
//! count; the last `fini` stops the roles in reverse order. A role that fails to start makes
//! `init` fail (Slurm then refuses the plugin) after the already started ones are stopped.
//!
//! The count alone is not enough: production slurmctld never calls the select plugin's `fini`
//! (only MEMORY_LEAK_DEBUG builds do), so the last `fini` never comes there. Every `fini` and
//! every later `init` therefore also reach [`Role::release`] / [`Role::reacquire`], so a role
//! whose end Slurm does signal (the priority role: `priority_g_fini` at shutdown and before
//! 24.11's re-exec reconfigure) stops its own work whatever the other role does.

use std::sync::{Mutex, PoisonError};

use crate::log;

/// One plugin role served by this `.so` (select, priority, ...).
pub trait Role: Sync {
    /// Why the role could not start (the plugin's own error type).
    type Error: std::error::Error;
    /// Short name for log lines (`select`).
    fn name(&self) -> &'static str;
    /// Sets the role up. Runs in every process that loads the plugin (slurmctld, slurmd,
    /// slurmstepd, clients), so it must stay cheap outside slurmctld.
    ///
    /// # Errors
    /// Any start-up failure; the plugin then fails to load.
    fn start(&self) -> Result<(), Self::Error>;
    /// Tears the role down (the last `fini`).
    fn stop(&self);
    /// Every `fini` that is not the last: a role may stop its work here if Slurm's `fini` for
    /// it is the only end it will ever see. Default: nothing (wait for the last `fini`).
    fn release(&self) {}
    /// Every `init` after the first: undo [`Role::release`] (24.11 re-initialises the priority
    /// plugin after a failed reconfigure). Default: nothing.
    ///
    /// # Errors
    /// As [`Role::start`].
    fn reacquire(&self) -> Result<(), Self::Error> {
        Ok(())
    }
}

static REFS: Mutex<usize> = Mutex::new(0);

/// The body of the exported `init`; the first one routes the `log` facade into Slurm's log,
/// labelled with `labels`.
///
/// # Errors
/// The first role start-up failure.
pub fn init<E: std::error::Error>(
    roles: &[&dyn Role<Error = E>],
    labels: log::Labels,
) -> Result<(), E> {
    let mut refs = REFS.lock().unwrap_or_else(PoisonError::into_inner);
    if *refs == 0 {
        log::install(labels);
        for (started, role) in roles.iter().enumerate() {
            if let Err(err) = role.start() {
                roles[..started].iter().rev().for_each(|r| r.stop());
                return Err(err);
            }
            ::log::debug!("{} role started", role.name());
        }
    } else {
        log::sync_level();
        ::log::debug!(
            "init #{}: the plugin is loaded under another role",
            *refs + 1
        );
        for role in roles {
            role.reacquire()?;
        }
    }
    *refs += 1;
    Ok(())
}

/// The body of the exported `fini`.
pub fn fini<E: std::error::Error>(roles: &[&dyn Role<Error = E>]) {
    let mut refs = REFS.lock().unwrap_or_else(PoisonError::into_inner);
    match *refs {
        0 => {}
        1 => {
            roles.iter().rev().for_each(|r| r.stop());
            *refs = 0;
        }
        n => {
            roles.iter().rev().for_each(|r| r.release());
            *refs = n - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const LABELS: log::Labels = log::Labels {
        prefix: |_| "test",
        events: "test-events",
    };

    struct Counting {
        starts: AtomicUsize,
        stops: AtomicUsize,
        releases: AtomicUsize,
        reacquires: AtomicUsize,
        fail: bool,
    }

    impl Counting {
        const fn new(fail: bool) -> Self {
            Self {
                starts: AtomicUsize::new(0),
                stops: AtomicUsize::new(0),
                releases: AtomicUsize::new(0),
                reacquires: AtomicUsize::new(0),
                fail,
            }
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("role failed to start")]
    struct StartFailed;

    impl Role for Counting {
        type Error = StartFailed;
        fn name(&self) -> &'static str {
            "counting"
        }
        fn start(&self) -> Result<(), StartFailed> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            if self.fail { Err(StartFailed) } else { Ok(()) }
        }
        fn stop(&self) {
            self.stops.fetch_add(1, Ordering::SeqCst);
        }
        fn release(&self) {
            self.releases.fetch_add(1, Ordering::SeqCst);
        }
        fn reacquire(&self) -> Result<(), StartFailed> {
            self.reacquires.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn roles_start_once_per_process_and_stop_with_the_last_fini() {
        static A: Counting = Counting::new(false);
        static B: Counting = Counting::new(false);
        static BAD: Counting = Counting::new(true);
        let roles: [&dyn Role<Error = StartFailed>; 2] = [&A, &B];

        // Loaded as two roles: two inits, one start each; two finis, one stop each.
        init(&roles, LABELS).unwrap();
        init(&roles, LABELS).unwrap();
        assert_eq!(
            (
                A.starts.load(Ordering::SeqCst),
                B.starts.load(Ordering::SeqCst)
            ),
            (1, 1)
        );
        assert_eq!(A.reacquires.load(Ordering::SeqCst), 1, "the second init");
        fini(&roles);
        assert_eq!(A.stops.load(Ordering::SeqCst), 0);
        assert_eq!(
            A.releases.load(Ordering::SeqCst),
            1,
            "a fini that is not the last still reaches every role (priority_g_fini)"
        );
        fini(&roles);
        assert_eq!(
            (
                A.stops.load(Ordering::SeqCst),
                B.stops.load(Ordering::SeqCst)
            ),
            (1, 1)
        );
        fini(&roles); // unbalanced fini is ignored
        assert_eq!(A.stops.load(Ordering::SeqCst), 1);

        // A failing role stops the ones started before it, and the count stays at zero.
        let failing: [&dyn Role<Error = StartFailed>; 2] = [&A, &BAD];
        assert!(init(&failing, LABELS).is_err());
        assert_eq!(
            (
                A.starts.load(Ordering::SeqCst),
                A.stops.load(Ordering::SeqCst)
            ),
            (2, 2)
        );
        init(&roles, LABELS).unwrap();
        assert_eq!(
            A.starts.load(Ordering::SeqCst),
            3,
            "a later init starts again"
        );
        fini(&roles);
    }
}
