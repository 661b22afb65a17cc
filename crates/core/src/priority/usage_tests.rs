use super::*;

/// A job started at 1000 with a 10-minute limit (expected end 1600), running.
fn job() -> ChargedJob {
    ChargedJob {
        start: 1000,
        end: 1600,
        end_exp: 1600,
        time_limit_mins: 10,
        ending: false,
        usage_factor: None,
    }
}

#[test]
fn a_running_job_is_charged_its_window_and_releases_as_much() {
    let c = job_charge(&job(), 1100, 1160, false, 4.0, 1.0).unwrap();
    assert_eq!(c.run_secs, 60.0);
    let a = Amount {
        wall: 60.0,
        billing: 240.0,
        tres_factor: 60.0,
    };
    assert_eq!((c.decayed, c.undecayed), (a, a));
    assert_eq!(c.run_secs_released, 60);
    // The window starts no earlier than the job.
    let c = job_charge(&job(), 900, 1030, false, 1.0, 1.0).unwrap();
    assert_eq!((c.run_secs, c.run_secs_released), (30.0, 30));
    assert_eq!(charge_window_start(&job(), 900), 1000);
    // A clock that went back charges nothing (never negative).
    let c = job_charge(&job(), 1200, 1100, false, 1.0, 1.0).unwrap();
    assert_eq!((c.run_secs, c.decayed.billing), (0.0, 0.0));
}

#[test]
fn the_end_charges_up_to_the_end_and_releases_the_unused_limit() {
    let ended = ChargedJob {
        end: 1300,
        ending: true,
        ..job()
    };
    // priority_p_job_end at 1310, last pass at 1100: 200 s used, 500 s of the limit left.
    let c = job_charge(&ended, 1100, 1310, true, 2.0, 1.0).unwrap();
    assert_eq!(c.run_secs, 200.0);
    assert_eq!(c.decayed.billing, 400.0);
    assert_eq!(c.run_secs_released, 1600 - 1100);
    // Without adjust_for_end (the decay pass) the end time does not cut the window.
    let c = job_charge(&ended, 1100, 1310, false, 2.0, 1.0).unwrap();
    assert_eq!(c.run_secs, 210.0);
    // Charged already: never again.
    let done = ChargedJob {
        end_exp: END_CHARGED,
        ..ended
    };
    assert_eq!(job_charge(&done, 1100, 1310, true, 2.0, 1.0), None);
}

#[test]
fn time_past_the_limit_or_the_expected_end_releases_only_what_was_reserved() {
    // Past the time limit (over-running job): nothing left to release.
    let c = job_charge(&job(), 1600, 1660, false, 1.0, 1.0).unwrap();
    assert_eq!((c.run_secs, c.run_secs_released), (60.0, 0));
    // Expected end moved earlier than the limit (e.g. an update): up to it only.
    let early = ChargedJob {
        end_exp: 1130,
        ..job()
    };
    let c = job_charge(&early, 1100, 1160, false, 1.0, 1.0).unwrap();
    assert_eq!(c.run_secs_released, 30);
    let c = job_charge(&early, 1140, 1160, false, 1.0, 1.0).unwrap();
    assert_eq!(c.run_secs_released, 0, "a negative int is no release");
    // An unlimited job (INFINITE minutes) releases its window.
    let unlimited = ChargedJob {
        time_limit_mins: u32::MAX,
        end_exp: i64::from(u32::MAX),
        ..job()
    };
    let c = job_charge(&unlimited, 1100, 1160, false, 1.0, 1.0).unwrap();
    assert_eq!(c.run_secs_released, 60);
}

#[test]
fn usage_factor_scales_every_amount() {
    let doubled = ChargedJob {
        usage_factor: Some(2.0),
        ..job()
    };
    let c = job_charge(&doubled, 1100, 1160, false, 3.0, 1.0).unwrap();
    assert_eq!(
        c.decayed,
        Amount {
            wall: 120.0,
            billing: 360.0,
            tres_factor: 120.0
        }
    );
    assert_eq!(c.undecayed, c.decayed);
    assert_eq!(c.run_secs_released, 120);
    // UsageFactor=0: free, but still a charge (run-seconds bookkeeping goes on).
    let free = ChargedJob {
        usage_factor: Some(0.0),
        ..job()
    };
    let c = job_charge(&free, 1100, 1160, false, 3.0, 1.0).unwrap();
    assert_eq!(
        (c.decayed.billing, c.decayed.wall, c.run_secs_released),
        (0.0, 0.0, 0)
    );
    assert_eq!(c.run_secs, 60.0);
    let half = ChargedJob {
        usage_factor: Some(0.5),
        ..job()
    };
    let c = job_charge(&half, 1100, 1161, false, 1.0, 1.0).unwrap();
    assert_eq!(c.run_secs_released, 30, "61 × 0.5 truncated as uint64_t");
}

#[test]
fn decay_applies_to_the_window_except_for_no_decay_qos() {
    let d = 1.0 - 0.693 / 100.0;
    let c = job_charge(&job(), 1100, 1110, false, 2.0, d).unwrap();
    let run_decay = 10.0 * d.powf(10.0);
    assert_eq!(c.decayed.wall, run_decay);
    assert_eq!(c.decayed.billing, run_decay * 2.0);
    assert_eq!(c.decayed.tres_factor, run_decay);
    assert_eq!(c.undecayed.wall, 10.0);
    assert_eq!(c.for_qos(true), &c.undecayed);
    assert_eq!(c.for_qos(false), &c.decayed);
    assert_eq!(c.run_secs_released, 10, "the release never decays");
}

#[test]
fn per_tres_rules() {
    assert_eq!(tres_released(60, 8), 480);
    assert_eq!(tres_released(60, 0), 0);
    assert_eq!(tres_released(60, crate::priority::NO_CONSUME_VAL64), 0);
    assert!(tres_charged(0, 4));
    assert!(!tres_charged(TRES_ENERGY, 4), "energy is never charged");
    assert!(!tres_charged(5, 0));
    assert!(!tres_charged(5, crate::priority::NO_CONSUME_VAL64));
    assert_eq!(release_run_secs(100, 30), (70, false));
    assert_eq!(release_run_secs(100, 100), (0, false));
    assert_eq!(release_run_secs(10, 30), (0, true), "underflow leaves 0");
}

#[test]
fn restart_takes_out_what_the_last_pass_charged() {
    assert_eq!(restart_release_factor(&job(), true, 1100), Some(100.0));
    let factor = ChargedJob {
        usage_factor: Some(1.5),
        ..job()
    };
    assert_eq!(restart_release_factor(&factor, true, 1100), Some(150.0));
    assert_eq!(
        restart_release_factor(&job(), false, 1100),
        None,
        "not running"
    );
    assert_eq!(
        restart_release_factor(&job(), true, 900),
        None,
        "started later"
    );
    assert_eq!(
        restart_release_factor(&job(), true, 0),
        None,
        "no last pass"
    );
    let done = ChargedJob {
        end_exp: END_CHARGED,
        ..job()
    };
    assert_eq!(restart_release_factor(&done, true, 1100), None);
    assert_eq!(restart_tres_released(100.0, 8), 800);
    assert_eq!(restart_tres_released(0.5, 3), 1);
    assert_eq!(
        restart_tres_released(100.0, crate::priority::NO_CONSUME_VAL64),
        0
    );
}

#[test]
fn which_jobs_a_pass_charges() {
    // running, started, with an association
    assert!(pass_charges(false, false, false, false, 1000, true));
    assert!(
        !pass_charges(false, true, false, false, 1000, true),
        "pending"
    );
    assert!(
        pass_charges(true, true, false, false, 1000, true),
        "CALCULATE_RUNNING: a requeued pending job with a start time"
    );
    assert!(
        !pass_charges(false, false, true, false, 1000, true),
        "ended"
    );
    assert!(
        !pass_charges(false, false, false, true, 1000, true),
        "power up"
    );
    assert!(
        !pass_charges(false, false, false, false, 0, true),
        "never started"
    );
    assert!(
        !pass_charges(false, false, false, false, 1000, false),
        "no association"
    );
}

#[test]
fn pass_plan_follows_the_decay_thread() {
    let d = 1.0 - 0.693 / 604_800.0;
    // First pass (no state file): classic does nothing, Fair Tree charges and scores.
    let first = pass_plan(false, 0, 5000, d);
    assert_eq!((first.decay, first.charge_and_score), (None, false));
    assert!(!first.moved);
    let first = pass_plan(true, 0, 5000, d);
    assert_eq!((first.decay, first.charge_and_score), (None, true));
    // The clock did not move.
    assert!(!pass_plan(false, 5000, 5000, d).charge_and_score);
    // A normal period.
    let p = pass_plan(false, 5000, 5060, d);
    assert_eq!(p.decay, Some(d.powf(60.0)));
    assert!(p.charge_and_score && p.moved);
    // No half-life: nothing to decay, but the period charges.
    let p = pass_plan(false, 5000, 5060, 1.0);
    assert_eq!((p.decay, p.charge_and_score), (None, true));
    // A huge gap never decays to 0.
    let p = pass_plan(true, 1, i64::from(u32::MAX), 0.5);
    assert_eq!(p.decay, Some(f64::MIN_POSITIVE));
}
