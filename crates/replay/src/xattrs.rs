//! Which extended attributes a replay may set, and how many.
//!
//! A plan is data from elsewhere (a recording of another machine, or a forged file), and `init`
//! and `run` usually run as root. Some attribute namespaces are not data but privilege:
//! `security.capability` gives whoever executes the file capabilities (root's, for practical
//! purposes), `system.posix_acl_*` give other users access, `security.*` labels decide what a
//! program may do under SELinux, Smack or AppArmor, and `trusted.*` holds metadata the kernel
//! trusts (overlayfs redirects and whiteouts). So a replay sets only `user.*` attributes
//! unless [`XattrPolicy`] lets more namespaces in, and never `security.capability`.
//!
//! Kernel memory is the other risk: on tmpfs every attribute stays in unswappable memory, so a
//! small plan naming thousands of 64 KiB attributes could pin hundreds of megabytes. [`budget`]
//! counts what a plan would set (the starting tree's attributes and every `setxattr` of the
//! run) against [`XattrLimits`] before anything is written.

use crate::error::{ReplayError, Result};
use crate::op::{OpKind, NONE};
use crate::plan::Plan;
use std::collections::HashMap;

/// The attribute never set, whatever the options: file capabilities.
pub const CAPABILITY: &str = "security.capability";

/// Namespaces of extended attributes a replay sets besides `user.*` (which grants nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XattrPolicy {
    /// `trusted.*`: metadata only CAP_SYS_ADMIN may read or write (overlayfs keeps redirects,
    /// whiteouts and metacopy markers there).
    pub trusted: bool,
    /// `security.*` other than `security.capability`: SELinux, Smack and AppArmor labels, IMA
    /// and EVM signatures.
    pub security: bool,
    /// `system.*`: POSIX ACLs (`system.posix_acl_access`, `system.posix_acl_default`), which
    /// can grant any user or group access.
    pub system: bool,
}

/// The namespaces [`XattrPolicy::parse`] knows, with what each allows (for help texts).
pub const NAMESPACES: [(&str, &str); 4] = [
    ("user", "user.* (always; grants nothing)"),
    ("trusted", "trusted.*: metadata the kernel trusts, such as overlayfs redirects and whiteouts"),
    ("security", "security.* labels (SELinux, Smack, AppArmor, IMA/EVM) that decide what a program may do"),
    ("system", "system.* POSIX ACLs, which can give any user access to a file"),
];

impl XattrPolicy {
    /// `user.*` only (the default).
    pub const USER: XattrPolicy = XattrPolicy { trusted: false, security: false, system: false };

    /// A comma-separated list of namespaces (`user`, `trusted`, `security`, `system`) or `all`.
    pub fn parse(list: &str) -> std::result::Result<XattrPolicy, String> {
        let mut p = XattrPolicy::USER;
        for n in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match n {
                "user" => {}
                "trusted" => p.trusted = true,
                "security" => p.security = true,
                "system" => p.system = true,
                "all" => p = XattrPolicy { trusted: true, security: true, system: true },
                _ => {
                    return Err(format!(
                        "{n:?} is not a namespace of extended attributes: give user, trusted, security, system or all"
                    ))
                }
            }
        }
        Ok(p)
    }

    /// The namespaces allowed, as [`XattrPolicy::parse`] takes them.
    pub fn names(&self) -> String {
        let mut v = vec!["user"];
        for (on, n) in [(self.trusted, "trusted"), (self.security, "security"), (self.system, "system")] {
            if on {
                v.push(n);
            }
        }
        v.join(",")
    }

    /// Whether an attribute named `name` may be set; else why not.
    pub fn allows(&self, name: &[u8]) -> std::result::Result<(), &'static str> {
        if name == CAPABILITY.as_bytes() {
            return Err("file capabilities (security.capability) are never restored: they grant privilege to whoever runs the file");
        }
        let Some(dot) = name.iter().position(|&b| b == b'.') else {
            return Err("not in a namespace");
        };
        if dot + 1 == name.len() {
            return Err("an empty name");
        }
        match &name[..dot] {
            b"user" => Ok(()),
            b"trusted" if self.trusted => Ok(()),
            b"security" if self.security => Ok(()),
            b"system" if self.system => Ok(()),
            b"trusted" => Err("trusted.* is restored only with --xattr-namespaces trusted"),
            b"security" => Err("security.* is restored only with --xattr-namespaces security"),
            b"system" => Err("system.* (POSIX ACLs) is restored only with --xattr-namespaces system"),
            _ => Err("not a namespace Linux knows"),
        }
    }
}

/// Bounds on the extended attributes one replay sets (the starting tree's and the run's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XattrLimits {
    /// Distinct attribute names on one file.
    pub per_file: u64,
    /// Bytes of one file's attributes (names, values and [`ATTR_OVERHEAD`] each).
    pub per_file_bytes: u64,
    /// Attributes in all.
    pub total: u64,
    /// Bytes of every attribute set, each counted every time it is set.
    pub total_bytes: u64,
}

/// What each attribute is counted as besides its name and value: about what the kernel keeps
/// for one on tmpfs (`struct simple_xattr` and its allocation).
pub const ATTR_OVERHEAD: u64 = 64;

impl Default for XattrLimits {
    fn default() -> Self {
        XattrLimits { per_file: 128, per_file_bytes: 256 << 10, total: 100_000, total_bytes: 16 << 20 }
    }
}

/// What a plan would set under a policy (see [`budget`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XattrBudget {
    /// Attributes the policy lets through (starting tree and run).
    pub attrs: u64,
    /// Their bytes (names, values, overhead), each set counted.
    pub bytes: u64,
    /// Attributes of the starting tree the policy leaves out.
    pub refused_init: u64,
    /// `setxattr` operations of the run the policy leaves out.
    pub refused_ops: u64,
    /// The first few left out: `name (why)`.
    pub refused_names: Vec<String>,
}

/// Checks what `plan` would set under `policy` against `limits`, before anything is written:
/// per file (a path of the starting tree or of a path call, or an fd slot) the distinct names
/// and their bytes, and in all every attribute set. Attributes the policy leaves out are
/// counted apart, not against the limits.
pub fn budget(plan: &Plan, policy: &XattrPolicy, limits: &XattrLimits) -> Result<XattrBudget> {
    let mut b = XattrBudget::default();
    // Per file: name -> largest size; keyed by path id, or by slot (high bit set).
    let mut files: HashMap<u64, HashMap<u32, u64>> = HashMap::new();
    let name_of = |id: u32| plan.literals.get(id as usize).map(String::as_bytes).unwrap_or(b"");
    let refuse = |b: &mut XattrBudget, name: &[u8], why: &str| {
        if b.refused_names.len() < 5 {
            b.refused_names.push(format!("{} ({why})", String::from_utf8_lossy(name)));
        }
    };
    let mut add = |b: &mut XattrBudget, key: u64, name: u32, size: u64| -> Result<()> {
        let cost = name_of(name).len() as u64 + size + ATTR_OVERHEAD;
        b.attrs += 1;
        b.bytes += cost;
        let f = files.entry(key).or_default();
        let e = f.entry(name).or_insert(0);
        *e = (*e).max(size);
        let n = f.len() as u64;
        let bytes: u64 = f.iter().map(|(&k, &v)| name_of(k).len() as u64 + v + ATTR_OVERHEAD).sum();
        let file = || match key >> 63 {
            0 => plan.paths.display(&plan.meta, key as u32),
            _ => format!("the file open in fd slot {}", key as u32),
        };
        if n > limits.per_file || bytes > limits.per_file_bytes {
            return Err(ReplayError::Usage(format!(
                "the plan sets {n} extended attributes ({bytes} bytes) on {}: more than the {} attributes and {} bytes \
                 a replay sets on one file (a forged plan?); prepare the plan with a filter that leaves that file out",
                file(),
                limits.per_file,
                limits.per_file_bytes
            )));
        }
        if b.attrs > limits.total || b.bytes > limits.total_bytes {
            return Err(ReplayError::Usage(format!(
                "the plan sets more than {} extended attributes or {} bytes of them in all (counting {} bytes each \
                 for the kernel's own): a replay sets at most that many, as they may stay in kernel memory \
                 (tmpfs); prepare the plan with a filter that leaves some files out",
                limits.total, limits.total_bytes, ATTR_OVERHEAD
            )));
        }
        Ok(())
    };
    for x in &plan.xattrs {
        let name = name_of(x.name);
        if let Err(why) = policy.allows(name) {
            b.refused_init += 1;
            refuse(&mut b, name, why);
            continue;
        }
        let size = if x.value != NONE {
            plan.values.get(x.value as usize).map(|v| v.len() as u64).unwrap_or(0)
        } else {
            x.size as u64
        };
        add(&mut b, x.path as u64, x.name, size)?;
    }
    // Removing an attribute takes away; only sets are counted and checked.
    for op in plan.ops.iter().filter(|o| o.kind == OpKind::Setxattr) {
        let name = name_of(op.path2);
        if let Err(why) = policy.allows(name) {
            b.refused_ops += 1;
            refuse(&mut b, name, why);
            continue;
        }
        let size = match op.off {
            v if v >= 0 => plan.values.get(v as usize).map(|v| v.len() as u64).unwrap_or(0),
            _ => op.size,
        };
        let key = if op.slot != NONE { (1 << 63) | op.slot as u64 } else { op.path as u64 };
        add(&mut b, key, op.path2, size)?;
    }
    Ok(b)
}

/// Per literal id: whether the run may set an attribute of that name.
pub(crate) fn allowed_names(plan: &Plan, policy: &XattrPolicy) -> Vec<bool> {
    plan.literals.iter().map(|l| policy.allows(l.as_bytes()).is_ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_user_attributes_by_default_and_never_capabilities() {
        let p = XattrPolicy::default();
        assert!(p.allows(b"user.note").is_ok());
        for n in [
            "security.capability",
            "security.selinux",
            "security.ima",
            "trusted.overlay.redirect",
            "system.posix_acl_access",
            "system.posix_acl_default",
            "user.",
            "user",
            "other.x",
            "",
        ] {
            assert!(p.allows(n.as_bytes()).is_err(), "{n}");
        }
        let all = XattrPolicy::parse("all").unwrap();
        assert!(all.allows(b"trusted.overlay.opaque").is_ok());
        assert!(all.allows(b"system.posix_acl_access").is_ok());
        assert!(all.allows(b"security.selinux").is_ok());
        assert!(all.allows(b"security.capability").is_err(), "never, whatever the options");
        assert_eq!(XattrPolicy::parse("user, system").unwrap().names(), "user,system");
        assert!(XattrPolicy::parse("capability").is_err());
    }
}
