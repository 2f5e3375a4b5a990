//! A set of metrics (counters, gauges, histograms) and its encodings: Prometheus protobuf with
//! native histograms for scrapers that ask for it, OpenMetrics text with classic buckets for the
//! others.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use latscope_hist::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NativeHistogram as PcNative, NativeHistogramBuckets, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::native::{NativeHistogram, NativeOptions};
use crate::ExportError;

/// Classic bucket bounds for latencies in seconds: 1, 2.5 and 5 times each power of ten from
/// 1 µs to 10 s.
pub const LATENCY_BOUNDS_SECONDS: &[f64] = &[
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Classic bucket bounds for sizes in bytes: powers of 4 from 512 B to 128 MiB.
pub const SIZE_BOUNDS_BYTES: &[f64] =
    &[512.0, 2048.0, 8192.0, 32768.0, 131072.0, 524288.0, 2097152.0, 8388608.0, 33554432.0, 134217728.0];

/// How a [`Histogram`] is exposed.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramOptions {
    /// The native histogram (schema, unit, bucket limit, zero threshold).
    pub native: NativeOptions,
    /// Upper bounds of the classic buckets of the text format, ascending, in exported units
    /// (`+Inf` is added). Default [`LATENCY_BOUNDS_SECONDS`].
    pub classic_bounds: Vec<f64>,
}

impl Default for HistogramOptions {
    fn default() -> Self {
        HistogramOptions { native: NativeOptions::default(), classic_bounds: LATENCY_BOUNDS_SECONDS.to_vec() }
    }
}

impl HistogramOptions {
    /// For sizes in bytes: unit 1, [`SIZE_BOUNDS_BYTES`].
    pub fn bytes() -> Self {
        HistogramOptions {
            native: NativeOptions { unit: 1.0, ..NativeOptions::default() },
            classic_bounds: SIZE_BOUNDS_BYTES.to_vec(),
        }
    }
}

/// A histogram series ready to encode.
#[derive(Debug, Clone)]
struct HistSeries {
    native: NativeHistogram,
    /// `(upper bound, count in the bucket)`, the last bound `+Inf`.
    classic: Vec<(f64, u64)>,
    created: Option<SystemTime>,
}

#[derive(Debug, Clone)]
enum Value {
    Counter(f64),
    Gauge(f64),
    Histogram(Box<HistSeries>),
}

/// The metric types this set holds (prometheus-client's type has no equality).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn metric_type(self) -> MetricType {
        match self {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        }
    }
}

#[derive(Debug, Clone)]
struct Family {
    name: String,
    help: String,
    kind: Kind,
    series: Vec<(Vec<(String, String)>, Value)>,
}

/// A set of metric families: what one scrape returns.
///
/// Build it with [`Metrics::counter`], [`Metrics::gauge`] and [`Metrics::histogram`] (a family is
/// created by its first series; setting a series again replaces it), then [`Metrics::encode`]
/// it, or share it with an [`ExpositionServer`](super::ExpositionServer) through
/// [`SharedMetrics`].
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    families: Vec<Family>,
}

/// The formats a scraper can get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus protobuf (`io.prometheus.client.MetricFamily`, length-delimited): native
    /// histograms, and classic buckets alongside.
    Protobuf,
    /// OpenMetrics 1.0 text: classic buckets only, `_created` of histograms.
    OpenMetricsText,
    /// The Prometheus text format 0.0.4 (`text/plain; version=0.0.4`): classic buckets only;
    /// what `promtool check metrics` reads and clients without an `Accept` header get.
    PrometheusText,
}

/// Media type of the Prometheus protobuf format.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
/// Media type of the OpenMetrics text format.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Media type of the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Format {
    /// The format to answer a request with this `Accept` header: the one the client gives the
    /// highest quality (`q`) among the delimited `io.prometheus.client.MetricFamily` protobuf,
    /// OpenMetrics text and `text/plain`; on a tie protobuf, then OpenMetrics (Prometheus lists
    /// them in that order). Without a header, or with only wildcards (`*/*`, `text/*`), the
    /// Prometheus text format, as Prometheus' own client libraries answer.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::PrometheusText };
        let (mut proto_q, mut om_q, mut text_q) = (0.0f64, 0.0f64, 0.0f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0;
            let (mut proto, mut delimited) = (None, None);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else { continue };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse().unwrap_or(0.0),
                    "proto" => proto = Some(v == "io.prometheus.client.MetricFamily"),
                    "encoding" => delimited = Some(v == "delimited"),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/vnd.google.protobuf" if proto != Some(false) && delimited != Some(false) => {
                    proto_q = proto_q.max(q)
                }
                "application/openmetrics-text" => om_q = om_q.max(q),
                "text/plain" => text_q = text_q.max(q),
                _ => {}
            }
        }
        if proto_q > 0.0 && proto_q >= om_q && proto_q >= text_q {
            Format::Protobuf
        } else if om_q > 0.0 && om_q >= text_q {
            Format::OpenMetricsText
        } else {
            Format::PrometheusText
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Protobuf => PROTOBUF_CONTENT_TYPE,
            Format::OpenMetricsText => OPENMETRICS_CONTENT_TYPE,
            Format::PrometheusText => TEXT_CONTENT_TYPE,
        }
    }
}

fn valid_name(name: &str, colons: bool) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':'))
}

/// A label value as every encoding exposes it: control characters written as visible escapes
/// (`\x1b`, `\r`, `\u{202e}`: [`latscope_event::escape::escape_controls`], the rule of the
/// terminal views), and at most [`latscope_event::bounds::MAX_TEXT`] bytes (cut values marked).
/// Values name what the traced system chose (containers, cgroups, processes): unescaped, an ESC or
/// a bidirectional override would reach every terminal and dashboard that shows the label.
pub fn label_value(v: &str) -> String {
    let mut s = latscope_event::escape::escape_controls(v).into_owned();
    latscope_event::bounds::cut(&mut s, latscope_event::bounds::MAX_TEXT, &mut Default::default());
    s
}

/// `s` made into a valid metric or label name: every character other than ASCII letters,
/// digits and `_` becomes `_`, and a leading digit gets a `_` before it.
pub fn sanitize_name(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if !out.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

impl Metrics {
    /// No metrics.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Number of series.
    pub fn len(&self) -> usize {
        self.families.iter().map(|f| f.series.len()).sum()
    }

    /// True without any series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn set(
        &mut self,
        name: &str,
        help: &str,
        kind: Kind,
        labels: &[(&str, &str)],
        value: Value,
    ) -> Result<(), ExportError> {
        if !valid_name(name, true) {
            return Err(ExportError::Name {
                what: "metric name",
                name: name.into(),
                why: "use letters, digits, _ and :, not starting with a digit",
            });
        }
        for (k, _) in labels {
            if !valid_name(k, false) || k.starts_with("__") {
                return Err(ExportError::Name {
                    what: "label name",
                    name: (*k).into(),
                    why: "use letters, digits and _, not starting with a digit or __",
                });
            }
            if *k == "le" && kind == Kind::Histogram {
                return Err(ExportError::Name {
                    what: "label name",
                    name: "le".into(),
                    why: "histograms use it for their buckets",
                });
            }
        }
        let labels: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), label_value(v))).collect();
        let family = match self.families.iter_mut().position(|f| f.name == name) {
            Some(i) if self.families[i].kind != kind => {
                return Err(ExportError::Name {
                    what: "metric name",
                    name: name.into(),
                    why: "already used by a metric of another type",
                })
            }
            Some(i) => &mut self.families[i],
            None => {
                self.families.push(Family { name: name.into(), help: help.into(), kind, series: Vec::new() });
                self.families.last_mut().expect("just pushed")
            }
        };
        match family.series.iter_mut().find(|(l, _)| *l == labels) {
            Some(s) => s.1 = value,
            None => family.series.push((labels, value)),
        }
        Ok(())
    }

    /// Sets a counter (a count since some start, never going down). `name` without `_total`:
    /// the encoders add it (a trailing `_total` given is removed).
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) -> Result<(), ExportError> {
        let name = name.strip_suffix("_total").unwrap_or(name);
        self.set(name, help, Kind::Counter, labels, Value::Counter(value))
    }

    /// Sets a gauge (a value that goes up and down).
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) -> Result<(), ExportError> {
        self.set(name, help, Kind::Gauge, labels, Value::Gauge(value))
    }

    /// Sets a histogram series from a latscope [`Histogram`] (cumulative, like a counter: the
    /// values since `created`, when given). Name it with its unit (`..._seconds`, `..._bytes`).
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        h: &Histogram,
        o: &HistogramOptions,
        created: Option<SystemTime>,
    ) -> Result<(), ExportError> {
        let native = NativeHistogram::from_histogram(h, &o.native);
        let unit = if o.native.unit.is_finite() && o.native.unit > 0.0 { o.native.unit } else { 1.0 };
        let mut bounds: Vec<f64> = o.classic_bounds.iter().copied().filter(|b| b.is_finite()).collect();
        bounds.sort_by(f64::total_cmp);
        bounds.dedup();
        // Bounds in recorded units for the histogram's own cumulative counts.
        let raw: Vec<u64> = bounds.iter().map(|b| (b / unit).round().clamp(0.0, u64::MAX as f64) as u64).collect();
        let cumulative = h.to_cumulative_le(&raw);
        let mut classic = Vec::with_capacity(cumulative.len());
        let mut prev = 0;
        for (i, &c) in cumulative.iter().enumerate() {
            classic.push((bounds.get(i).copied().unwrap_or(f64::INFINITY), c.saturating_sub(prev)));
            prev = c;
        }
        self.set(
            name,
            help,
            Kind::Histogram,
            labels,
            Value::Histogram(Box::new(HistSeries { native, classic, created })),
        )
    }

    /// Removes every series of the family `name` (all of them when `labels` is `None`, else the
    /// one with these labels).
    pub fn remove(&mut self, name: &str, labels: Option<&[(&str, &str)]>) {
        let name = name.strip_suffix("_total").unwrap_or(name);
        if let Some(i) = self.families.iter().position(|f| f.name == name) {
            match labels {
                None => {
                    self.families.remove(i);
                }
                Some(l) => {
                    self.families[i].series.retain(|(s, _)| {
                        s.len() != l.len() || s.iter().zip(l).any(|((a, b), (c, d))| a != c || b != d)
                    });
                }
            }
        }
    }

    /// The metrics in `format`.
    pub fn encode(&self, format: Format) -> Result<Vec<u8>, ExportError> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Snapshot(Arc::new(self.clone()))));
        match format {
            Format::OpenMetricsText => {
                let mut s = String::new();
                prometheus_client::encoding::text::encode(&mut s, &registry)
                    .map_err(|e| ExportError::Encode(e.to_string()))?;
                Ok(s.into_bytes())
            }
            Format::Protobuf => prometheus_client::encoding::prometheus_protobuf::encode_to_vec(&registry)
                .map_err(|e| ExportError::Encode(e.to_string())),
            Format::PrometheusText => Ok(self.text_004().into_bytes()),
        }
    }

    /// The Prometheus text format 0.0.4 (prometheus-client writes only OpenMetrics text, whose
    /// `_total` and `_created` lines a 0.0.4 parser such as `promtool` takes for families of
    /// their own, without help). Counters are named with `_total`, histograms have classic
    /// buckets (`le` first, as in the OpenMetrics answer), `_sum` and `_count`.
    fn text_004(&self) -> String {
        use std::fmt::Write;
        fn esc(v: &str, quote: bool) -> String {
            let mut o = String::with_capacity(v.len());
            for c in v.chars() {
                match c {
                    '\\' => o.push_str("\\\\"),
                    '\n' => o.push_str("\\n"),
                    '"' if quote => o.push_str("\\\""),
                    c => o.push(c),
                }
            }
            o
        }
        fn num(v: f64) -> String {
            if v == f64::INFINITY {
                "+Inf".into()
            } else if v == f64::NEG_INFINITY {
                "-Inf".into()
            } else if v.is_nan() {
                "NaN".into()
            } else {
                format!("{v}")
            }
        }
        fn labels(first: Option<(&str, String)>, l: &[(String, String)]) -> String {
            let all: Vec<String> = first
                .into_iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .chain(l.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v, true))))
                .collect();
            if all.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", all.join(","))
            }
        }
        let mut out = String::new();
        for f in &self.families {
            let (name, kind) = match f.kind {
                Kind::Counter => (format!("{}_total", f.name), "counter"),
                Kind::Gauge => (f.name.clone(), "gauge"),
                Kind::Histogram => (f.name.clone(), "histogram"),
            };
            let _ = writeln!(out, "# HELP {name} {}", esc(&f.help, false));
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (l, v) in &f.series {
                match v {
                    Value::Counter(x) | Value::Gauge(x) => {
                        let _ = writeln!(out, "{name}{} {}", labels(None, l), num(*x));
                    }
                    Value::Histogram(h) => {
                        let mut cum = 0u64;
                        for (bound, c) in &h.classic {
                            cum += c;
                            let _ = writeln!(out, "{name}_bucket{} {cum}", labels(Some(("le", num(*bound))), l));
                        }
                        let _ = writeln!(out, "{name}_sum{} {}", labels(None, l), num(h.native.sum));
                        let _ = writeln!(out, "{name}_count{} {}", labels(None, l), h.native.count);
                    }
                }
            }
        }
        out
    }
}

/// The metrics handed to prometheus-client's encoders at scrape time.
#[derive(Debug)]
struct Snapshot(Arc<Metrics>);

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0.families {
            let mut me = encoder.encode_descriptor(&f.name, &f.help, None, f.kind.metric_type())?;
            for (labels, value) in &f.series {
                let mut se = me.encode_family(labels)?;
                match value {
                    Value::Counter(v) => se.encode_counter::<NoLabelSet, f64, f64>(v, None)?,
                    Value::Gauge(v) => se.encode_gauge(v)?,
                    Value::Histogram(h) => {
                        let spans: Vec<(i32, u32)> = h.native.spans.iter().map(|s| (s.offset, s.length)).collect();
                        let native = PcNative {
                            schema: i32::from(h.native.schema),
                            zero_threshold: h.native.zero_threshold,
                            zero_count: h.native.zero_count,
                            negative: NativeHistogramBuckets { spans: &[], deltas: &[] },
                            positive: NativeHistogramBuckets { spans: &spans, deltas: &h.native.deltas },
                            created: h.created,
                        };
                        se.encode_histogram_with_native::<NoLabelSet>(
                            h.native.sum,
                            h.native.count,
                            &h.classic,
                            None,
                            native,
                        )?
                    }
                }
            }
        }
        Ok(())
    }
}

/// [`Metrics`] shared between whoever updates them (an agent, once per interval) and the
/// exposition server; cloning shares. A scrape encodes the set current when it starts, without
/// holding a lock while encoding.
#[derive(Debug, Clone, Default)]
pub struct SharedMetrics(Arc<RwLock<Arc<Metrics>>>, Arc<AtomicU64>);

impl SharedMetrics {
    /// Shares `m`.
    pub fn new(m: Metrics) -> SharedMetrics {
        SharedMetrics(Arc::new(RwLock::new(Arc::new(m))), Arc::default())
    }

    /// Scrapes answered through [`SharedMetrics::render`] so far. A scrape counts before it
    /// takes the set: one counted after a [`SharedMetrics::set`] returned saw that set (the
    /// agent uses this to show a new series at zero before its first counts).
    pub fn scrapes(&self) -> u64 {
        self.1.load(Ordering::SeqCst)
    }

    /// Replaces the whole set.
    pub fn set(&self, m: Metrics) {
        let mut g = self.0.write().unwrap_or_else(|p| p.into_inner());
        *g = Arc::new(m);
    }

    /// Changes the set in place (copying it if a scrape is encoding it).
    pub fn update<R>(&self, f: impl FnOnce(&mut Metrics) -> R) -> R {
        let mut g = self.0.write().unwrap_or_else(|p| p.into_inner());
        f(Arc::make_mut(&mut g))
    }

    /// The current set.
    pub fn get(&self) -> Arc<Metrics> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The answer to a scrape with this `Accept` header: `(content type, body)`. For mounting
    /// the metrics in another HTTP server.
    pub fn render(&self, accept: Option<&str>) -> Result<(&'static str, Vec<u8>), ExportError> {
        let format = Format::negotiate(accept);
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok((format.content_type(), self.get().encode(format)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMETHEUS_2_42_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    const PROMETHEUS_2_42: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn negotiation_follows_the_accept_header() {
        assert_eq!(Format::negotiate(Some(PROMETHEUS_2_42_NATIVE)), Format::Protobuf);
        assert_eq!(Format::negotiate(Some(PROMETHEUS_2_42)), Format::OpenMetricsText);
        assert_eq!(Format::negotiate(None), Format::PrometheusText);
        assert_eq!(Format::negotiate(Some("*/*")), Format::PrometheusText);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::PrometheusText);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4")), Format::PrometheusText);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text;version=1.0.0")), Format::OpenMetricsText);
        assert_eq!(Format::negotiate(Some("text/plain;q=1, application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5")), Format::PrometheusText);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5")),
            Format::PrometheusText
        );
        // Protobuf of something else, or the text protobuf encoding, is not what we write.
        assert_eq!(
            Format::negotiate(Some("application/vnd.google.protobuf;proto=other.Thing")),
            Format::PrometheusText
        );
        assert_eq!(
            Format::negotiate(Some(
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"
            )),
            Format::PrometheusText
        );
    }

    #[test]
    fn the_prometheus_text_format_names_counters_with_total_and_helps_every_family() {
        let mut m = Metrics::new();
        let h: Histogram = [500u64, 2_000_000, 2_000_000, 30_000_000_000].into_iter().collect();
        m.histogram("lat_seconds", "Latency.", &[("op", "r\"e\\a\nd")], &h, &HistogramOptions::default(), None)
            .unwrap();
        m.counter("events", "Events\nseen.", &[("op", "read")], 5.0).unwrap();
        m.gauge("up", "Up.", &[], 1.0).unwrap();
        let text = String::from_utf8(m.encode(Format::PrometheusText).unwrap()).unwrap();
        assert!(
            text.contains(
                "# HELP events_total Events\\nseen.\n# TYPE events_total counter\nevents_total{op=\"read\"} 5\n"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE lat_seconds histogram\n"), "{text}");
        // A newline in a label value is shown as `\n` (escape_controls), whose backslash the text
        // format escapes.
        let l = "op=\"r\\\"e\\\\a\\\\nd\"";
        assert!(text.contains(&format!("lat_seconds_bucket{{le=\"0.000001\",{l}}} 1\n")), "{text}");
        assert!(text.contains(&format!("lat_seconds_bucket{{le=\"+Inf\",{l}}} 4\n")), "{text}");
        let sum = text.lines().find_map(|x| x.strip_prefix(&format!("lat_seconds_sum{{{l}}} "))).unwrap();
        assert!((sum.parse::<f64>().unwrap() - 30.0040005).abs() < 1e-9, "{text}");
        assert!(text.contains(&format!("lat_seconds_count{{{l}}} 4\n")), "{text}");
        assert!(text.contains("# HELP up Up.\n# TYPE up gauge\nup 1\n"), "{text}");
        assert!(!text.contains("_created") && !text.contains("# EOF"), "{text}");
    }

    /// Label values name containers, cgroups and processes the traced system chose: they carried
    /// raw ESC, BEL, CR and bidirectional overrides into every scrape. Every encoding now carries
    /// them as visible escapes.
    #[test]
    fn label_values_carry_no_control_character_in_any_encoding() {
        let evil = "lib/\x1b[31mEVIL\x1b]0;t\x07\r\nname\u{202e}\u{9b}.so";
        let mut m = Metrics::new();
        let h: Histogram = [500u64, 2_000_000].into_iter().collect();
        m.histogram("latscope_x_seconds", "x", &[("container", evil)], &h, &HistogramOptions::default(), None).unwrap();
        m.counter("latscope_y", "y", &[("host", evil)], 1.0).unwrap();
        for f in [Format::PrometheusText, Format::OpenMetricsText, Format::Protobuf] {
            let out = m.encode(f).unwrap();
            let text = String::from_utf8_lossy(&out);
            assert!(!text.contains('\u{202e}') && !text.contains('\u{9b}'), "{f:?}");
            assert!(!text.contains("\x1b[") && !text.contains('\x07') && !text.contains('\r'), "{f:?}: {text}");
            if f == Format::Protobuf {
                // Binary, with the value as it is stored.
                assert!(text.contains(r"lib/\x1b[31mEVIL\x1b]0;t\x07\r\nname\u{202e}\u{9b}.so"), "{text}");
            } else {
                assert!(!out.iter().any(|&b| b < 0x20 && b != b'\n'), "{f:?}: {text}");
                // The value as the text formats escape a backslash: `\\x1b`.
                assert!(
                    text.contains(r#"container="lib/\\x1b[31mEVIL\\x1b]0;t\\x07\\r\\nname\\u{202e}\\u{9b}.so""#),
                    "{text}"
                );
            }
        }
        assert_eq!(label_value("plain/ü"), "plain/ü");
        assert!(label_value(&"x".repeat(10_000)).len() <= latscope_event::bounds::MAX_TEXT);
    }

    #[test]
    fn names_are_checked_and_sanitized() {
        let mut m = Metrics::new();
        assert!(m.gauge("9lives", "", &[], 1.0).is_err());
        assert!(m.gauge("ok:name_1", "", &[("__x", "")], 1.0).is_err());
        assert!(m.gauge("ok", "", &[("a-b", "")], 1.0).is_err());
        m.gauge("ok", "help", &[("disk", "vda")], 1.0).unwrap();
        assert!(m.counter("ok", "", &[], 1.0).is_err(), "a gauge named ok exists");
        assert!(m
            .histogram("h_seconds", "", &[("le", "1")], &Histogram::new(), &HistogramOptions::default(), None)
            .is_err());
        assert_eq!(sanitize_name("read-latency.p99"), "read_latency_p99");
        assert_eq!(sanitize_name("2x"), "_2x");
    }

    #[test]
    fn text_has_classic_buckets_and_counters() {
        let mut m = Metrics::new();
        let h: Histogram = [500u64, 2_000_000, 2_000_000, 30_000_000_000].into_iter().collect();
        m.histogram("lat_seconds", "Latency.", &[("op", "read")], &h, &HistogramOptions::default(), None).unwrap();
        m.counter("events_total", "Events.", &[("op", "read")], 4.0).unwrap();
        m.counter("events", "Events.", &[("op", "read")], 5.0).unwrap(); // replaces
        let text = String::from_utf8(m.encode(Format::OpenMetricsText).unwrap()).unwrap();
        assert!(text.contains("# TYPE lat_seconds histogram"), "{text}");
        assert!(text.contains("lat_seconds_count{op=\"read\"} 4"), "{text}");
        assert!(
            text.contains("lat_seconds_bucket{le=\"1e-6\",op=\"read\"} 1")
                || text.contains("lat_seconds_bucket{op=\"read\",le=\"1e-6\"} 1")
                || text.contains("le=\"0.000001\""),
            "{text}"
        );
        assert!(text.contains("le=\"+Inf\""), "{text}");
        assert!(text.contains("events_total{op=\"read\"} 5"), "{text}");
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(m.len(), 2);
        m.remove("events_total", Some(&[("op", "read")]));
        assert_eq!(m.len(), 1);
    }
}
