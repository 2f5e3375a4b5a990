use super::*;

/// splitmix64 with Box-Muller normals: samples of known distributions.
struct Rng(u64);

impl Rng {
    fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        ((self.u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (2.0 * std::f64::consts::PI * self.unit()).cos()
    }
    /// A lognormal latency: median `m` ns, log-sd `s`, plus `shift` ns.
    fn latency(&mut self, m: f64, s: f64, shift: f64) -> u64 {
        (m * (s * self.normal()).exp() + shift) as u64
    }
}

fn sample(r: &mut Rng, n: usize, m: f64, s: f64, shift: f64) -> Histogram {
    (0..n).map(|_| r.latency(m, s, shift)).collect()
}

const QS: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

fn strict() -> Settings {
    Settings { min_change: 0.0, correction: Correction::None, run_noise: 0.0, ..Default::default() }
}

#[test]
fn quantile_intervals_hold_their_level_when_nothing_changed() {
    // Two samples of one lognormal distribution, 400 times: each quantile's test, on its own and
    // with no threshold, says "changed" about 5 % of the time, as its level says.
    let mut r = Rng(1);
    let mut flagged = [0u32; 4];
    let trials = 400;
    for _ in 0..trials {
        let (a, b) = (sample(&mut r, 20_000, 50_000.0, 0.8, 0.0), sample(&mut r, 20_000, 50_000.0, 0.8, 0.0));
        for (k, q) in QS.iter().enumerate() {
            let mut o = compare(&[quantile(&a, *q).unwrap()], &[quantile(&b, *q).unwrap()], &strict());
            judge(&mut [&mut o], &strict());
            flagged[k] += u32::from(o.verdict.changed());
        }
    }
    for (k, f) in flagged.iter().enumerate() {
        let rate = *f as f64 / trials as f64;
        assert!((0.01..=0.10).contains(&rate), "p{}: {rate} of A/A comparisons flagged", QS[k] * 100.0);
    }
}

#[test]
fn a_known_delay_is_found_with_its_size_and_nothing_else_is_flagged() {
    // B's calls take 20 us more: each quantile q of a lognormal moves from x_q to x_q + 20 us.
    let mut r = Rng(2);
    // Samples of a known distribution have no run-to-run noise.
    let s = Settings { run_noise: 0.0, ..Settings::default() };
    let (m, sd, d) = (100_000.0, 0.5, 20_000.0);
    let (a, b) = (sample(&mut r, 50_000, m, sd, 0.0), sample(&mut r, 50_000, m, sd, d));
    let (c, e) = (sample(&mut r, 50_000, m, sd, 0.0), sample(&mut r, 50_000, m, sd, 0.0));
    let mut outs: Vec<(f64, Outcome)> = Vec::new();
    for q in QS {
        let z = dist::normal_quantile(q);
        let truth = d / (m * (sd * z).exp());
        outs.push((truth, compare(&[quantile(&a, q).unwrap()], &[quantile(&b, q).unwrap()], &s)));
        outs.push((0.0, compare(&[quantile(&c, q).unwrap()], &[quantile(&e, q).unwrap()], &s)));
    }
    let mut refs: Vec<&mut Outcome> = outs.iter_mut().map(|(_, o)| o).collect();
    assert_eq!(judge(&mut refs, &s), 8);
    for (truth, o) in &outs {
        // Each interval misses its truth 5 % of the time: the size is checked within 3 points.
        assert!((o.change - truth).abs() < 0.03, "truth {truth}: {o:?}");
        if *truth > 0.1 {
            assert_eq!(o.verdict, Verdict::Increase, "{truth}: {o:?}");
        } else if *truth == 0.0 {
            assert!(!o.verdict.changed(), "{o:?}");
        }
    }
}

#[test]
fn many_metrics_compared_together_keep_the_chance_of_any_false_verdict_at_alpha() {
    // 200 A/A comparisons of 5 groups x 4 quantiles, no threshold: with the correction, at most
    // about 5 % of them say anything changed; without it, most would.
    let mut r = Rng(3);
    let trials = 200;
    let (mut any_bh, mut any_holm, mut any_none) = (0, 0, 0);
    for _ in 0..trials {
        let mut outs = Vec::new();
        for g in 0..5 {
            let m = 10_000.0 * (g + 1) as f64;
            let (a, b) = (sample(&mut r, 5_000, m, 1.0, 0.0), sample(&mut r, 5_000, m, 1.0, 0.0));
            for q in &QS[..3] {
                outs.push(compare(&[quantile(&a, *q).unwrap()], &[quantile(&b, *q).unwrap()], &strict()));
            }
        }
        for (c, any) in [
            (Correction::BenjaminiHochberg, &mut any_bh),
            (Correction::Holm, &mut any_holm),
            (Correction::None, &mut any_none),
        ] {
            let s = Settings { correction: c, ..strict() };
            let mut o = outs.clone();
            let mut refs: Vec<&mut Outcome> = o.iter_mut().collect();
            judge(&mut refs, &s);
            *any += usize::from(o.iter().any(|x| x.verdict.changed()));
        }
    }
    let f = |n: usize| n as f64 / trials as f64;
    assert!(f(any_bh) <= 0.09 && f(any_holm) <= 0.09, "BH {} Holm {}", f(any_bh), f(any_holm));
    assert!(f(any_none) > 0.3, "without a correction {}", f(any_none));
}

#[test]
fn a_percentile_resting_on_few_operations_is_too_few_to_tell() {
    let mut r = Rng(4);
    let (a, b) = (sample(&mut r, 2_000, 1e5, 1.0, 0.0), sample(&mut r, 2_000, 3e5, 1.0, 0.0));
    let s = Settings { run_noise: 0.0, ..Settings::default() };
    let o = compare(&[quantile(&a, 0.999).unwrap()], &[quantile(&b, 0.999).unwrap()], &s);
    assert_eq!(o.verdict, Verdict::TooFew);
    assert_eq!(o.note, "rests on A: 2 operations, B: 2 operations; 10 needed");
    // One operation: no verdict either, whatever its value.
    let one: Histogram = [3003u64].into_iter().collect();
    let other: Histogram = [2777u64].into_iter().collect();
    let o = compare(&[quantile(&one, 0.99).unwrap()], &[quantile(&other, 0.99).unwrap()], &s);
    assert_eq!(o.verdict, Verdict::TooFew);
    // The p50 of the same 2000 rests on 1000: judged, and tripled.
    let mut o = compare(&[quantile(&a, 0.5).unwrap()], &[quantile(&b, 0.5).unwrap()], &s);
    judge(&mut [&mut o], &s);
    assert_eq!(o.verdict, Verdict::Increase);
    assert!((o.change - 2.0).abs() < 0.3, "{o:?}");
}

#[test]
fn a_change_below_the_threshold_is_the_same_and_above_it_a_change() {
    // 400 000 calls each: a 2 % shift is real but below 5 %: "same"; with no threshold, a change.
    let mut r = Rng(5);
    let (a, b) = (sample(&mut r, 400_000, 1e6, 0.3, 0.0), sample(&mut r, 400_000, 1.02e6, 0.3, 0.0));
    let (qa, qb) = (quantile(&a, 0.5).unwrap(), quantile(&b, 0.5).unwrap());
    let s = Settings { run_noise: 0.0, ..Settings::default() };
    let mut o = compare(&[qa], &[qb], &s);
    judge(&mut [&mut o], &s);
    assert_eq!(o.verdict, Verdict::Same, "{o:?}");
    let mut o = compare(&[qa], &[qb], &strict());
    judge(&mut [&mut o], &strict());
    assert_eq!(o.verdict, Verdict::Increase, "{o:?}");
    let c = sample(&mut r, 400_000, 1.2e6, 0.3, 0.0);
    let mut o = compare(&[qa], &[quantile(&c, 0.5).unwrap()], &s);
    judge(&mut [&mut o], &s);
    assert_eq!(o.verdict, Verdict::Increase, "{o:?}");
    let (lo, hi) = o.ci.unwrap();
    assert!(lo > 0.05 && lo < 0.2 && hi > 0.2, "{o:?}");
}

#[test]
fn repeated_runs_carry_their_run_to_run_noise_into_the_interval() {
    // Each run's latencies are scaled by its own factor (a run-to-run effect of 10 %, what a
    // page cache or a CPU frequency does): one run per side is flagged often; three runs per
    // side, whose scatter measures that noise, about as often as the level allows.
    let mut r = Rng(6);
    let trials = 200;
    let (mut single, mut repeated, mut assumed) = (0, 0, 0);
    let s = strict();
    for _ in 0..trials {
        let run = |r: &mut Rng| {
            let f = (0.1 * r.normal()).exp();
            quantile(&sample(r, 5_000, 1e5 * f, 0.5, 0.0), 0.5).unwrap()
        };
        let a: Vec<Estimate> = (0..3).map(|_| run(&mut r)).collect();
        let b: Vec<Estimate> = (0..3).map(|_| run(&mut r)).collect();
        let mut o = compare(&a[..1], &b[..1], &s);
        judge(&mut [&mut o], &s);
        single += usize::from(o.verdict.changed());
        // One run per side with the default assumption of 10 % run-to-run noise.
        let d = Settings::default();
        let mut o = compare(&a[..1], &b[..1], &d);
        judge(&mut [&mut o], &d);
        assumed += usize::from(o.verdict.changed());
        let mut o = compare(&a, &b, &s);
        judge(&mut [&mut o], &s);
        repeated += usize::from(o.verdict.changed());
        assert_eq!(o.df.round(), o.df.round().clamp(2.0, 4.0));
    }
    assert!(single as f64 / trials as f64 > 0.5, "{single}");
    assert!(repeated as f64 / trials as f64 <= 0.09, "{repeated}");
    assert!(assumed as f64 / trials as f64 <= 0.05, "{assumed}");
}

#[test]
fn rates_are_normalised_and_bursts_widen_their_interval() {
    // 1000 calls in 10 s against 2000 in 20 s: the same rate.
    let s = Settings { run_noise: 0.0, ..Settings::default() };
    let mut o = compare(&[rate(1000, 10.0, &[]).unwrap()], &[rate(2000, 20.0, &[]).unwrap()], &s);
    judge(&mut [&mut o], &s);
    assert_eq!((o.a, o.b), (100.0, 100.0));
    assert!(!o.verdict.changed());
    // Bursty windows (all calls in a few windows): the dispersion widens the interval.
    let steady = vec![10u64; 100];
    let mut bursty = vec![0u64; 100];
    for w in bursty.iter_mut().step_by(10) {
        *w = 100;
    }
    let (e1, e2) = (rate(1000, 10.0, &steady).unwrap(), rate(1000, 10.0, &bursty).unwrap());
    assert!((e1.var_log - 1e-3).abs() < 1e-9, "{e1:?}");
    assert!(e2.var_log > 50.0 * e1.var_log, "{e2:?}");
    assert!(rate(0, 1.0, &[]).is_none());
}

#[test]
fn adjustments_match_worked_examples() {
    // Benjamini and Hochberg (1995)'s procedure on a small set, worked by hand.
    let p = [0.01, 0.04, 0.03, 0.005];
    let bh = adjust(&p, Correction::BenjaminiHochberg);
    let want = [0.02, 0.04, 0.04, 0.02];
    for (x, y) in bh.iter().zip(want) {
        assert!((x - y).abs() < 1e-12, "{bh:?}");
    }
    let holm = adjust(&p, Correction::Holm);
    let want = [0.03, 0.06, 0.06, 0.02];
    for (x, y) in holm.iter().zip(want) {
        assert!((x - y).abs() < 1e-12, "{holm:?}");
    }
    assert_eq!(adjust(&p, Correction::None), p);
    assert!(adjust(&[], Correction::Holm).is_empty());
}
