//! Host memory a call may still take, and allocation that fails with an error
//! instead of aborting the process.
//!
//! A user's number (`max_length` with `padding="max_length"`,
//! `pad_to_multiple_of`, a fixed padding length in tokenizer.json) decides how
//! big a call's output is; Rust's ordinary allocation aborts the whole process
//! when it fails ("memory allocation of N bytes failed"), and on Linux an
//! allocation the kernel grants may still get the process OOM-killed once it is
//! touched. So an output above [`PROBE_ABOVE`] bytes is first compared with what
//! this process may still get ([`room`]: the least of the machine's available
//! memory, each cgroup v2 or v1 memory limit above the process, and
//! `RLIMIT_AS` / `RLIMIT_DATA`), and every output buffer is made with
//! [`try_vec`], whose failure is an [`Error::HostMemory`] (Python:
//! `gpu_tok.OutputTooLargeError`, a `MemoryError`).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Outputs up to this many bytes skip the probe (a few small files read, ~50 us):
/// only the fallible allocation guards them.
pub const PROBE_ABOVE: u64 = 64 << 20;

/// The memory this process may still take, and which bound decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Room {
    pub bytes: u64,
    pub bound: String,
}

impl Room {
    fn unknown() -> Self {
        Room {
            bytes: u64::MAX,
            bound: "no limit found".into(),
        }
    }

    fn lower(&mut self, bytes: Option<u64>, bound: impl FnOnce() -> String) {
        if let Some(b) = bytes.filter(|&b| b < self.bytes) {
            self.bytes = b;
            self.bound = bound();
        }
    }
}

/// `bytes` as "3.7 GiB".
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Refuses `what` ("the output"...) of `bytes` (None: more than a usize can
/// count) when this process could not hold it; `cause` names the settings that
/// made it so big ("lower {cause}").
pub fn check(what: &str, bytes: Option<usize>, cause: impl FnOnce() -> String) -> Result<()> {
    let need = match bytes {
        Some(b) if b as u64 <= PROBE_ABOVE => return Ok(()),
        Some(b) => b as u64,
        None => {
            let need = "more memory than can be addressed";
            return Err(too_big(what, need.into(), None, cause()));
        }
    };
    let room = room();
    if need <= room.bytes {
        return Ok(());
    }
    Err(too_big(what, gib(need), Some(&room), cause()))
}

fn too_big(what: &str, need: String, room: Option<&Room>, cause: String) -> Error {
    let room = room.map_or(String::new(), |r| {
        format!(" ({}: {})", gib(r.bytes), r.bound)
    });
    Error::HostMemory(format!(
        "{what} would need {need}, more memory than this process can get{room}: lower {cause}"
    ))
}

/// An empty Vec with room for `n` values, or an [`Error::HostMemory`] naming
/// `what` when the allocator refuses (never an abort).
pub fn try_vec<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = n.saturating_mul(std::mem::size_of::<T>()) as u64;
        let room = room();
        Error::HostMemory(format!(
            "could not allocate {} for {what}: this process cannot get that much memory ({} left: {})",
            gib(bytes),
            gib(room.bytes),
            room.bound
        ))
    })?;
    Ok(v)
}

/// The memory this process may still take now (see the module comment).
pub fn room() -> Room {
    let mut room = Room::unknown();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let available = field_kib(&meminfo, "MemAvailable:")
        .map(|kib| kib + field_kib(&meminfo, "SwapFree:").unwrap_or(0))
        .or_else(total_ram);
    room.lower(available, || {
        "the machine's available memory and swap".into()
    });
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if let Some((dir, top)) = cgroup_dir(&cgroups, &mounts, None) {
        for level in levels(&dir, &top) {
            room.lower(cgroup_v2_room(&level), || {
                format!("cgroup v2 memory.max of {}", level.display())
            });
        }
    }
    if let Some((dir, _)) = cgroup_dir(&cgroups, &mounts, Some("memory")) {
        room.lower(cgroup_v1_room(&dir), || {
            format!("cgroup v1 memory limit of {}", dir.display())
        });
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let limits = [
        (
            // SAFETY: getrlimit writes one rlimit into the struct passed.
            rlimit(|l| unsafe { libc::getrlimit(libc::RLIMIT_AS, l) }),
            "RLIMIT_AS (ulimit -v)",
            "VmSize:",
        ),
        (
            // SAFETY: as above.
            rlimit(|l| unsafe { libc::getrlimit(libc::RLIMIT_DATA, l) }),
            "RLIMIT_DATA (ulimit -d)",
            "VmData:",
        ),
    ];
    for (limit, name, used) in limits {
        if let Some(limit) = limit {
            let used = field_kib(&status, used).unwrap_or(0);
            room.lower(Some(limit.saturating_sub(used)), || name.into());
        }
    }
    room
}

/// The value of a "Name:   1234 kB" line, in bytes.
fn field_kib(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

fn total_ram() -> Option<u64> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| (pages as u64).saturating_mul(page as u64))
}

/// The soft limit `get` (a getrlimit call) reads; None when unlimited.
fn rlimit(get: impl FnOnce(&mut libc::rlimit) -> libc::c_int) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let ok = get(&mut limit) == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The folder of this process's cgroup and the mount point above it: cgroup v2
/// (`controller` None) or the v1 hierarchy holding `controller`.
/// `cgroups` is /proc/self/cgroup, `mounts` /proc/self/mountinfo.
fn cgroup_dir(cgroups: &str, mounts: &str, controller: Option<&str>) -> Option<(PathBuf, PathBuf)> {
    let path = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = match controller {
            None => controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        wanted.then_some(path)
    })?;
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let (root, mount_point) = (*fields.get(3)?, *fields.get(4)?);
        let mut right = right.split(' ');
        let (fs, _, options) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        let matches = match controller {
            None => fs == "cgroup2",
            Some(c) => fs == "cgroup" && options.split(',').any(|x| x == c),
        };
        if !matches {
            return None;
        }
        // The mount shows the hierarchy from `root` down; a path outside it (a
        // cgroup namespace) is read at the mount point itself.
        let inside = Path::new(path).strip_prefix(root).unwrap_or(Path::new(""));
        let top = PathBuf::from(mount_point);
        Some((top.join(inside), top))
    })
}

/// `dir` and each folder above it up to `top`: every level's limit applies.
fn levels(dir: &Path, top: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut at = dir;
    while at != top {
        match at.parent() {
            Some(parent) if parent.starts_with(top) => {
                out.push(parent.to_path_buf());
                at = parent;
            }
            _ => break,
        }
    }
    out
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A "name value" line of a memory.stat file.
fn stat_value(stat: &str, name: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok()).flatten()
    })
}

/// Limit minus usage, counting the inactive file cache as free (the kernel
/// reclaims it before it kills): what a container's OOM killer compares.
fn cgroup_v2_room(dir: &Path) -> Option<u64> {
    let limit = read_u64(&dir.join("memory.max"))?; // "max": no limit at this level
    let used = read_u64(&dir.join("memory.current")).unwrap_or(0);
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let reclaimable = stat_value(&stat, "inactive_file").unwrap_or(0);
    Some(limit.saturating_sub(used.saturating_sub(reclaimable)))
}

/// As [`cgroup_v2_room`]; v1's `hierarchical_memory_limit` already is the least
/// limit of this group and those above it.
fn cgroup_v1_room(dir: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let limit = [
        read_u64(&dir.join("memory.limit_in_bytes")),
        stat_value(&stat, "hierarchical_memory_limit"),
    ]
    .into_iter()
    .flatten()
    .min()?;
    if limit >= 1 << 62 {
        return None; // v1 writes "no limit" as a page-rounded i64::MAX
    }
    let used = read_u64(&dir.join("memory.usage_in_bytes")).unwrap_or(0);
    let reclaimable = stat_value(&stat, "total_inactive_file").unwrap_or(0);
    Some(limit.saturating_sub(used.saturating_sub(reclaimable)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 /kubepods/pod1 /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct";

    #[test]
    fn cgroup_folders_from_proc_files() {
        let cgroups = "4:memory:/jobs/a\n2:cpu,cpuacct:/kubepods/pod1/c\n0::/user.slice/x\n";
        assert_eq!(
            cgroup_dir(cgroups, MOUNTS, Some("memory")),
            Some((
                "/sys/fs/cgroup/memory/jobs/a".into(),
                "/sys/fs/cgroup/memory".into()
            ))
        );
        assert_eq!(
            cgroup_dir(cgroups, MOUNTS, None),
            Some((
                "/sys/fs/cgroup/unified/user.slice/x".into(),
                "/sys/fs/cgroup/unified".into()
            ))
        );
        // A mount of a sub-hierarchy (a container's view): the path is taken below its root.
        assert_eq!(
            cgroup_dir(cgroups, MOUNTS, Some("cpu")),
            Some(("/sys/fs/cgroup/cpu/c".into(), "/sys/fs/cgroup/cpu".into()))
        );
        assert_eq!(cgroup_dir("0::/\n", "", None), None);
        let top = Path::new("/sys/fs/cgroup");
        assert_eq!(
            levels(&top.join("a/b"), top),
            vec![top.join("a/b"), top.join("a"), top.to_path_buf()]
        );
    }

    #[test]
    fn cgroup_limits_count_reclaimable_cache_as_free() {
        let dir = std::env::temp_dir().join(format!("gpu-tok-cgroup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.max"), "1000000\n").unwrap();
        std::fs::write(dir.join("memory.current"), "600000\n").unwrap();
        std::fs::write(dir.join("memory.stat"), "anon 1\ninactive_file 100000\n").unwrap();
        assert_eq!(cgroup_v2_room(&dir), Some(500_000));
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_v2_room(&dir), None);
        std::fs::write(dir.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), "300\n").unwrap();
        std::fs::write(
            dir.join("memory.stat"),
            "hierarchical_memory_limit 2000\ntotal_inactive_file 100\n",
        )
        .unwrap();
        assert_eq!(cgroup_v1_room(&dir), Some(1800));
        std::fs::write(
            dir.join("memory.stat"),
            "hierarchical_memory_limit 9223372036854771712\n",
        )
        .unwrap();
        assert_eq!(cgroup_v1_room(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failed_allocation_is_an_error_not_an_abort() {
        let Err(Error::HostMemory(why)) = try_vec::<i64>(usize::MAX / 16, "the test's ids") else {
            panic!("an impossible allocation succeeded");
        };
        assert!(why.contains("the test's ids"), "{why}");
        assert!(try_vec::<i64>(16, "small").unwrap().capacity() >= 16);
        assert!(check("the output", Some(1 << 20), || "nothing".into()).is_ok());
        let Err(Error::HostMemory(why)) = check("the output", None, || "padding length 7".into())
        else {
            panic!("an overflowing size was accepted");
        };
        assert!(why.contains("padding length 7"), "{why}");
    }

    #[test]
    fn room_is_found_on_linux() {
        let room = room();
        assert!(room.bytes > 0 && room.bytes < u64::MAX, "{room:?}");
    }
}
