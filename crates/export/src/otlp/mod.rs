//! OpenTelemetry metrics: latscope histograms and counters as an OTLP
//! `ExportMetricsServiceRequest` ([`Batch`]), POSTed over OTLP/HTTP with protobuf to a collector
//! ([`OtlpClient`], `http://HOST:4318/v1/metrics`).
//!
//! Histograms become **exponential histograms** (cumulative temporality) at scale [`SCALE`] (4:
//! 16 buckets per power of two, each 4.4 % wide), the resolution of the in-kernel histograms (16
//! linear sub-buckets per power of two, 3.1 to 6.25 % wide) and the schema of the Prometheus
//! native histograms ([`crate::prometheus::NativeOptions`]). Each latscope bucket goes **whole**
//! to the exponential bucket holding its middle (see [`latscope_hist::Histogram::to_exponential`]),
//! so count, sum, min and max are exact and equal to the Prometheus export's; a value can sit
//! at most half a latscope bucket from its exponential bucket. The message types are generated
//! from the official `.proto` files (vendored under `proto/`) by prost.

mod client;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use latscope_hist::Histogram;
use prost::Message;

pub use client::{OtlpClient, OtlpOptions, OtlpStats, ERROR_KINDS};

/// The OTLP messages (generated from `opentelemetry/proto/**.proto`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    /// `opentelemetry.proto.common.v1`.
    pub mod common {
        /// Version 1.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.common.v1.rs"));
        }
    }
    /// `opentelemetry.proto.resource.v1`.
    pub mod resource {
        /// Version 1.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.resource.v1.rs"));
        }
    }
    /// `opentelemetry.proto.metrics.v1`.
    pub mod metrics {
        /// Version 1.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.metrics.v1.rs"));
        }
    }
    /// `opentelemetry.proto.collector.metrics.v1`.
    pub mod collector {
        /// The metrics service.
        pub mod metrics {
            /// Version 1.
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.collector.metrics.v1.rs"));
            }
        }
    }
}

use proto::collector::metrics::v1::ExportMetricsServiceRequest;
use proto::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use proto::metrics::v1::{
    exponential_histogram_data_point::Buckets, metric, number_data_point, AggregationTemporality, ExponentialHistogram,
    ExponentialHistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use proto::resource::v1::Resource;

/// The exponential histograms' scale: buckets grow by `2^(2^-4)` (+4.4 %), 16 per power of two,
/// as the in-kernel histograms have 16 sub-buckets per power of two.
pub const SCALE: i8 = 4;

/// The default OTLP/HTTP port of a collector (`receivers: otlp: protocols: http:`).
pub const DEFAULT_PORT: u16 = 4318;

/// One export: a resource, one instrumentation scope, its metrics; data points are added by
/// metric name (a name's first description and unit stay).
pub struct Batch {
    request: ExportMetricsServiceRequest,
    index: HashMap<String, usize>,
    now_ns: u64,
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// String attributes, their values escaped and bounded as Prometheus label values
/// ([`crate::prometheus::label_value`]): they name processes and containers the traced system
/// chose, and the collector and `/metrics` show the same series.
fn attributes(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| KeyValue {
            key: (*k).to_string(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(crate::prometheus::label_value(v))) }),
            ..Default::default()
        })
        .collect()
}

impl Batch {
    /// A batch of the resource with string attributes `resource` (e.g. `service.name`,
    /// `host.name`), scope `scope` of version `version`, its points taken at `now`.
    pub fn new(resource: &[(&str, &str)], scope: &str, version: &str, now: SystemTime) -> Batch {
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource { attributes: attributes(resource), ..Default::default() }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: scope.to_string(),
                        version: version.to_string(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        Batch { request, index: HashMap::new(), now_ns: nanos(now) }
    }

    fn metric(&mut self, name: &str, description: &str, unit: &str, data: metric::Data) -> &mut metric::Data {
        let metrics = &mut self.request.resource_metrics[0].scope_metrics[0].metrics;
        let i = *self.index.entry(name.to_string()).or_insert_with(|| {
            metrics.push(Metric {
                name: name.to_string(),
                description: description.to_string(),
                unit: unit.to_string(),
                data: Some(data),
                ..Default::default()
            });
            metrics.len() - 1
        });
        metrics[i].data.as_mut().expect("set when made")
    }

    /// Adds a cumulative exponential-histogram point of `h` (values times `unit_factor`: `1e-9`
    /// for nanoseconds as seconds) to metric `name`, counted since `start`.
    #[allow(clippy::too_many_arguments)]
    pub fn histogram(
        &mut self,
        name: &str,
        description: &str,
        unit: &str,
        attrs: &[(&str, &str)],
        h: &Histogram,
        unit_factor: f64,
        start: SystemTime,
    ) {
        let e = h.to_exponential_scaled(SCALE, unit_factor);
        let point = ExponentialHistogramDataPoint {
            attributes: attributes(attrs),
            start_time_unix_nano: nanos(start),
            time_unix_nano: self.now_ns,
            count: e.count,
            sum: Some(e.sum),
            scale: i32::from(e.scale),
            zero_count: e.zero_count,
            positive: Some(Buckets { offset: e.offset, bucket_counts: e.counts }),
            min: e.min.map(|v| v as f64 * unit_factor),
            max: e.max.map(|v| v as f64 * unit_factor),
            zero_threshold: 0.0,
            ..Default::default()
        };
        let empty = metric::Data::ExponentialHistogram(ExponentialHistogram {
            data_points: Vec::new(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        });
        if let metric::Data::ExponentialHistogram(x) = self.metric(name, description, unit, empty) {
            x.data_points.push(point);
        }
    }

    /// Adds a cumulative monotonic sum point (a counter) of `value` since `start` to metric `name`.
    pub fn counter(
        &mut self,
        name: &str,
        description: &str,
        unit: &str,
        attrs: &[(&str, &str)],
        value: u64,
        start: SystemTime,
    ) {
        let point = NumberDataPoint {
            attributes: attributes(attrs),
            start_time_unix_nano: nanos(start),
            time_unix_nano: self.now_ns,
            value: Some(number_data_point::Value::AsInt(i64::try_from(value).unwrap_or(i64::MAX))),
            ..Default::default()
        };
        let empty = metric::Data::Sum(Sum {
            data_points: Vec::new(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        });
        if let metric::Data::Sum(x) = self.metric(name, description, unit, empty) {
            x.data_points.push(point);
        }
    }

    /// The request as built.
    pub fn request(&self) -> &ExportMetricsServiceRequest {
        &self.request
    }

    /// Data points in the batch, all metrics.
    pub fn points(&self) -> usize {
        self.request.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .map(|m| match &m.data {
                Some(metric::Data::ExponentialHistogram(x)) => x.data_points.len(),
                Some(metric::Data::Sum(x)) => x.data_points.len(),
                _ => 0,
            })
            .sum()
    }

    /// The request in protobuf, the body of an OTLP/HTTP POST.
    pub fn encode(&self) -> Vec<u8> {
        self.request.encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-kernel buckets of the agent (16 linear sub-buckets per power of two), each recorded
    /// at its middle as the agent does: every bucket's count lands whole in one exponential
    /// bucket, the one holding the bucket's middle up to half a latscope bucket (1/256), and
    /// count and sum are exact.
    #[test]
    fn kernel_buckets_go_whole_to_the_exponential_bucket_of_their_middle() {
        let mut total = 0u64;
        for e in 8u32..34 {
            for sub in 0..16u64 {
                let low = (16 + sub) << (e - 4);
                let mid = low + (1u64 << (e - 5));
                let mut h = Histogram::new();
                h.record_n(mid, 3);
                let mut b = Batch::new(&[], "t", "0", UNIX_EPOCH);
                b.histogram("x", "", "s", &[], &h, 1e-9, UNIX_EPOCH);
                let Some(metric::Data::ExponentialHistogram(x)) =
                    &b.request().resource_metrics[0].scope_metrics[0].metrics[0].data
                else {
                    panic!("not an exponential histogram")
                };
                let p = &x.data_points[0];
                let pos = p.positive.as_ref().unwrap();
                assert_eq!(pos.bucket_counts, vec![3], "bucket [{low}, {}) ns", low + (1 << (e - 4)));
                assert_eq!((p.count, p.scale, p.zero_count), (3, 4, 0));
                let base = 2f64.powf(1.0 / 16.0);
                let (lo, hi) = (base.powi(pos.offset), base.powi(pos.offset + 1));
                let m = mid as f64 * 1e-9;
                assert!(lo < m * (1.0 + 1.0 / 256.0) && m < hi * (1.0 + 1.0 / 256.0), "{m} in ({lo}, {hi}]");
                assert!((p.sum.unwrap() - 3.0 * m).abs() <= 1e-12 * m, "{:?}", p.sum);
                assert_eq!((p.min, p.max), (Some(m), Some(m)));
                total += 1;
            }
        }
        assert_eq!(total, 26 * 16);
    }

    /// Points of one name share one metric; counters are cumulative monotonic sums; the encoded
    /// request decodes to the same message.
    #[test]
    fn points_group_by_metric_and_the_request_round_trips() {
        let start = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let mut b = Batch::new(&[("service.name", "latscope-agent")], "latscope", "1", start);
        let mut h = Histogram::new();
        h.record_n(0, 2);
        h.record_n(10_000_000, 5);
        b.histogram("lat", "d", "s", &[("series", "a")], &h, 1e-9, start);
        b.histogram("lat", "d", "s", &[("series", "b")], &Histogram::new(), 1e-9, start);
        b.counter("errors", "e", "1", &[("series", "a")], 7, start);
        assert_eq!(b.points(), 3);
        let back = ExportMetricsServiceRequest::decode(&b.encode()[..]).unwrap();
        assert_eq!(&back, b.request());
        let metrics = &back.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics.len(), 2);
        let Some(metric::Data::ExponentialHistogram(x)) = &metrics[0].data else { panic!() };
        assert_eq!(x.aggregation_temporality, AggregationTemporality::Cumulative as i32);
        assert_eq!((x.data_points[0].count, x.data_points[0].zero_count), (7, 2));
        assert_eq!(x.data_points[1].count, 0);
        let Some(metric::Data::Sum(s)) = &metrics[1].data else { panic!() };
        assert!(s.is_monotonic);
        assert_eq!(s.data_points[0].value, Some(number_data_point::Value::AsInt(7)));
    }

    /// Attribute values name processes and containers the traced system chose: they reached the
    /// collector with raw ESC, BEL, CR and bidirectional overrides while `/metrics` escaped them.
    /// They now carry the same visible escapes and length bound as the Prometheus label values.
    #[test]
    fn attribute_values_carry_no_control_character_and_match_the_prometheus_labels() {
        let evil = "lib/\x1b[31mEVIL\x1b]0;t\x07\r\nname\u{202e}\u{9b}.so";
        let long = "x".repeat(10_000);
        let start = UNIX_EPOCH;
        let mut b = Batch::new(&[("host.name", evil)], "latscope", "1", start);
        let h: Histogram = [500u64, 2_000_000].into_iter().collect();
        b.histogram("lat", "d", "s", &[("comm", evil)], &h, 1e-9, start);
        b.counter("errors", "e", "1", &[("comm", &long)], 1, start);
        let back = ExportMetricsServiceRequest::decode(&b.encode()[..]).unwrap();
        let rm = &back.resource_metrics[0];
        let metrics = &rm.scope_metrics[0].metrics;
        let Some(metric::Data::ExponentialHistogram(x)) = &metrics[0].data else { panic!() };
        let Some(metric::Data::Sum(s)) = &metrics[1].data else { panic!() };
        let value = |kv: &KeyValue| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => s.clone(),
            other => panic!("{other:?}"),
        };
        let resource = value(&rm.resource.as_ref().unwrap().attributes[0]);
        let point = value(&x.data_points[0].attributes[0]);
        for v in [&resource, &point] {
            assert!(!v.chars().any(|c| c.is_control() || latscope_event::escape::is_control(c)), "{v:?}");
            assert_eq!(v, r"lib/\x1b[31mEVIL\x1b]0;t\x07\r\nname\u{202e}\u{9b}.so");
            assert_eq!(*v, crate::prometheus::label_value(evil));
        }
        let cut = value(&s.data_points[0].attributes[0]);
        assert!(cut.len() <= latscope_event::bounds::MAX_TEXT, "{}", cut.len());
        assert_eq!(cut, crate::prometheus::label_value(&long));
    }
}
