//! The small tables written next to the events: processes, disks and traces.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use latscope_event::{dev_major_minor, StackKind, StackTable};
use std::collections::HashMap;

use super::convert::{stack_key, stack_tag};
use super::schema::{table_schema, DISK_COLUMNS, PROCESS_COLUMNS, STACK_COLUMNS, TRACE_COLUMNS};
use super::{FrameNamer, TraceExport};
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

/// Frame names without a symbolizer: kernel frames as named when recording, user frames as
/// `file+0xoffset` (the views' names when the binary is not at hand).
fn plain_names(table: &StackTable) -> HashMap<u32, Vec<String>> {
    table
        .iter()
        .map(|e| {
            let names = e
                .frames
                .iter()
                .map(|f| match (e.kind, &f.sym, &f.file, f.off) {
                    (StackKind::Kernel, Some(s), _, _) => s.clone(),
                    (StackKind::User, _, Some(file), Some(off)) => {
                        let base = file.rsplit('/').next().unwrap_or(file);
                        format!("{base}{}+{off:#x}", if f.deleted { " (deleted)" } else { "" })
                    }
                    _ => format!("{:#x}", f.addr),
                })
                .collect();
            (e.id, names)
        })
        .collect()
}

/// One row per frame of every stack of each trace (a stack without frames: one row saying why).
pub(crate) fn stacks(traces: &[&TraceExport], namer: Option<&FrameNamer>) -> Result<RecordBatch, ExportError> {
    struct Row<'a> {
        t: &'a TraceExport,
        tag: u64,
        e: &'a latscope_event::StackEntry,
        frame: usize,
        name: String,
    }
    let mut rows: Vec<Row<'_>> = Vec::new();
    for t in traces {
        let names = match namer {
            Some(n) => (n.0)(&t.stacks),
            None => plain_names(&t.stacks),
        };
        let tag = stack_tag(&t.host, t.header.wall_ns(t.header.start_ns));
        let mut entries: Vec<_> = t.stacks.iter().collect();
        entries.sort_by_key(|e| e.id);
        for e in entries {
            let n = names.get(&e.id);
            if e.frames.is_empty() {
                let what = if e.kind == StackKind::Kernel { "kernel" } else { "user" };
                let name = n.and_then(|v| v.first().cloned()).unwrap_or_else(|| match &e.missing {
                    Some(why) => format!("[{what} stack missing: {why}]"),
                    None => format!("[no {what} stack]"),
                });
                rows.push(Row { t, tag, e, frame: 0, name });
                continue;
            }
            for k in 0..e.frames.len() {
                let name = n.and_then(|v| v.get(k).cloned()).unwrap_or_else(|| format!("{:#x}", e.frames[k].addr));
                rows.push(Row { t, tag, e, frame: k, name });
            }
        }
    }
    fn frame<'r>(r: &Row<'r>) -> Option<&'r latscope_event::Frame> {
        r.e.frames.get(r.frame)
    }
    let user = |r: &Row<'_>| r.e.kind == StackKind::User;
    batch(
        STACK_COLUMNS,
        vec![
            strs(rows.iter().map(|r| r.t.host.as_str())),
            times(rows.iter().map(|r| Some(start_us(r.t)))),
            i64s(rows.iter().map(|r| stack_key(r.tag, r.e.id))),
            i32s(rows.iter().map(|r| r.e.id as i32)),
            strs(rows.iter().map(|r| if user(r) { "user" } else { "kernel" })),
            i32s(rows.iter().map(|r| r.frame as i32)),
            i64s(rows.iter().map(|r| frame(r).map_or(0, |f| f.addr as i64))),
            i64s(rows.iter().map(|r| frame(r).and_then(|f| f.off).filter(|_| user(r)).map_or(0, |o| o as i64))),
            strs(rows.iter().map(|r| r.name.as_str())),
            opt_strs(rows.iter().map(|r| frame(r).and_then(|f| f.file.as_deref()).filter(|_| user(r)))),
            opt_strs(rows.iter().map(|r| frame(r).and_then(|f| f.build_id.as_deref()).filter(|_| user(r)))),
            Arc::new(BooleanArray::from(rows.iter().map(|r| frame(r).is_some_and(|f| f.deleted)).collect::<Vec<_>>())),
            Arc::new(BooleanArray::from(rows.iter().map(|r| r.e.truncated).collect::<Vec<_>>())),
            opt_strs(rows.iter().map(|r| r.e.missing.as_deref())),
        ],
    )
}
