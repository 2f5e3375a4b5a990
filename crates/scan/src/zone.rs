//! Zone-map decisions: what a block's metadata says about the events a consumer counts.

use latscope_event::source::{Zone, ZonePlan};
use latscope_trace::{BlockMeta, Column};

/// The zone of a block for `plan`, and the columns the decision makes unnecessary.
pub(crate) fn of(m: &BlockMeta, plan: &ZonePlan) -> (Zone, &'static [Column]) {
    let Some(k) = m.kinds else { return (Zone::default(), &[]) };
    let kind = plan.kind as usize;
    if k.get(kind).is_none_or(|&n| n == 0) {
        return (Zone { empty: true, all_kind: false, at: None }, &Column::ALL);
    }
    let all_kind = m.only_kind(plan.kind as u8);
    let (lo, hi) = if plan.by_end { (m.end_min, m.end_max) } else { (m.ts_min, m.ts_max) };
    let at = match (lo, hi, &plan.bucket) {
        (Some(lo), Some(hi), Some(bucket)) if all_kind || !plan.at_needs_all_kind => {
            bucket(lo).filter(|&b| Some(b) == bucket(hi)).map(|_| if plan.by_end { hi } else { lo })
        }
        _ => None,
    };
    let skip: &'static [Column] = match (all_kind, at.is_some()) {
        (true, true) => &[Column::Kind, Column::Ts],
        (true, false) => &[Column::Kind],
        (false, true) => &[Column::Ts],
        (false, false) => &[],
    };
    (Zone { empty: false, all_kind, at }, skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::EventKind;
    use std::sync::Arc;

    fn meta(kinds: [u64; 3], ts: (u64, u64), end: (u64, u64)) -> BlockMeta {
        BlockMeta {
            kinds: Some(kinds),
            ts_min: Some(ts.0),
            ts_max: Some(ts.1),
            end_min: Some(end.0),
            end_max: Some(end.1),
            ..Default::default()
        }
    }

    fn plan(by_end: bool, needs_all: bool) -> ZonePlan {
        ZonePlan {
            kind: EventKind::Syscall,
            by_end,
            at_needs_all_kind: needs_all,
            bucket: Some(Arc::new(|t| Some(t / 100))),
        }
    }

    #[test]
    fn a_block_without_the_kind_is_empty_and_decodes_nothing() {
        let (z, skip) = of(&meta([0, 5, 0], (0, 1), (0, 1)), &plan(false, false));
        assert!(z.empty);
        assert_eq!(skip.len(), Column::ALL.len());
    }

    #[test]
    fn a_block_of_one_kind_in_one_bucket_needs_neither_kind_nor_ts() {
        let (z, skip) = of(&meta([7, 0, 0], (110, 150), (120, 190)), &plan(false, false));
        assert_eq!(z, Zone { empty: false, all_kind: true, at: Some(110) });
        assert_eq!(skip, &[Column::Kind, Column::Ts]);
        // By end time: the block's largest end is the bucket's representative.
        let (z, _) = of(&meta([7, 0, 0], (110, 150), (120, 190)), &plan(true, false));
        assert_eq!(z.at, Some(190));
    }

    #[test]
    fn a_block_across_buckets_or_of_mixed_kinds_keeps_the_columns_it_needs() {
        let (z, skip) = of(&meta([7, 0, 0], (90, 150), (90, 150)), &plan(false, false));
        assert_eq!((z.all_kind, z.at), (true, None));
        assert_eq!(skip, &[Column::Kind]);
        let (z, skip) = of(&meta([7, 1, 0], (110, 150), (110, 150)), &plan(false, false));
        assert_eq!((z.all_kind, z.at), (false, Some(110)));
        assert_eq!(skip, &[Column::Ts]);
        // Mixed kinds and a consumer that reads lat alone in a bucket: no shortcut.
        let (z, skip) = of(&meta([7, 1, 0], (110, 150), (110, 150)), &plan(false, true));
        assert_eq!(z, Zone { empty: false, all_kind: false, at: None });
        assert!(skip.is_empty());
    }

    #[test]
    fn old_files_without_zone_maps_decode_as_usual() {
        let (z, skip) = of(&BlockMeta::default(), &plan(false, false));
        assert_eq!(z, Zone::default());
        assert!(skip.is_empty());
    }
}
