//! The small tables written next to the events: processes, disks and traces.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use latscope_event::dev_major_minor;

use super::schema::{table_schema, DISK_COLUMNS, PROCESS_COLUMNS, TRACE_COLUMNS};
use super::TraceExport;
use crate::ExportError;

fn strs<'a>(v: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn opt_strs<'a>(v: impl IntoIterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(v.into_iter().collect::<StringArray>())
}

fn i64s(v: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(v))
}

fn i32s(v: impl IntoIterator<Item = i32>) -> ArrayRef {
    Arc::new(Int32Array::from_iter_values(v))
}

fn times(v: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(v.into_iter().collect::<TimestampMicrosecondArray>().with_timezone("UTC"))
}

fn batch(cols: &[super::schema::ColumnDoc], columns: Vec<ArrayRef>) -> Result<RecordBatch, ExportError> {
    RecordBatch::try_new(table_schema(cols), columns)
        .map_err(|e| ExportError::Invalid(format!("building a table: {e}")))
}

/// Wall-clock µs of the start of a trace.
fn start_us(t: &TraceExport) -> i64 {
    t.header.wall_ns(t.header.start_ns).div_euclid(1000)
}

/// The processes running when each recording started.
pub(crate) fn processes(traces: &[&TraceExport]) -> Result<RecordBatch, ExportError> {
    let rows: Vec<_> = traces.iter().flat_map(|t| t.header.processes.iter().map(move |p| (*t, p))).collect();
    batch(
        PROCESS_COLUMNS,
        vec![
            strs(rows.iter().map(|(t, _)| t.host.as_str())),
            times(rows.iter().map(|(t, _)| Some(start_us(t)))),
            i32s(rows.iter().map(|(_, p)| p.pid as i32)),
            i32s(rows.iter().map(|(_, p)| p.ppid as i32)),
            i64s(rows.iter().map(|(_, p)| i64::from(p.uid))),
            strs(rows.iter().map(|(t, p)| t.header.users.get(&p.uid).map_or("", |s| s.as_str()))),
            strs(rows.iter().map(|(_, p)| p.comm.as_str())),
            strs(rows.iter().map(|(_, p)| p.exe.as_str())),
            strs(rows.iter().map(|(_, p)| p.cmdline.as_str())),
            strs(rows.iter().map(|(_, p)| p.cwd.as_str())),
        ],
    )
}

/// The block devices of each recorded machine.
pub(crate) fn disks(traces: &[&TraceExport]) -> Result<RecordBatch, ExportError> {
    let rows: Vec<_> = traces.iter().flat_map(|t| t.header.block_devices.iter().map(move |d| (*t, d))).collect();
    batch(
        DISK_COLUMNS,
        vec![
            strs(rows.iter().map(|(t, _)| t.host.as_str())),
            times(rows.iter().map(|(t, _)| Some(start_us(t)))),
            i64s(rows.iter().map(|(_, d)| i64::from(d.dev))),
            i32s(rows.iter().map(|(_, d)| dev_major_minor(d.dev).0 as i32)),
            i32s(rows.iter().map(|(_, d)| dev_major_minor(d.dev).1 as i32)),
            strs(rows.iter().map(|(_, d)| d.name.as_str())),
            i64s(rows.iter().map(|(_, d)| d.size_bytes as i64)),
            opt_strs(rows.iter().map(|(_, d)| d.scheduler.as_deref())),
            Arc::new(BooleanArray::from(rows.iter().map(|(_, d)| d.rotational).collect::<Vec<_>>())),
            opt_strs(rows.iter().map(|(_, d)| d.parent.as_deref())),
        ],
    )
}

/// One row per exported trace.
pub(crate) fn traces(traces: &[&TraceExport], export_filter: Option<&str>) -> Result<RecordBatch, ExportError> {
    let cmd: Vec<String> = traces.iter().map(|t| t.header.command_line.join(" ")).collect();
    let file: Vec<String> = traces.iter().map(|t| t.path.display().to_string()).collect();
    batch(
        TRACE_COLUMNS,
        vec![
            strs(traces.iter().map(|t| t.host.as_str())),
            times(traces.iter().map(|t| Some(start_us(t)))),
            times(traces.iter().map(|t| t.end_ns.map(|e| t.header.wall_ns(e).div_euclid(1000)))),
            strs(file.iter().map(String::as_str)),
            strs(traces.iter().map(|t| t.header.kernel.as_str())),
            strs(traces.iter().map(|t| t.header.machine.as_str())),
            i32s(traces.iter().map(|t| t.header.cpus as i32)),
            strs(traces.iter().map(|t| t.header.latscope_version.as_str())),
            strs(cmd.iter().map(String::as_str)),
            opt_strs(traces.iter().map(|t| t.header.filter.as_deref())),
            opt_strs(traces.iter().map(|_| export_filter)),
            i64s(traces.iter().map(|t| t.events_read as i64)),
            i64s(traces.iter().map(|t| t.events_exported as i64)),
            i64s(traces.iter().map(|t| t.events_lost as i64)),
            i64s(traces.iter().map(|t| t.corrupt_blocks as i64)),
        ],
    )
}
