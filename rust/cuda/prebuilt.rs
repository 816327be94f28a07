//! Prebuilt kernels: CUBINs of the built-in sources for the SMs the wheel
//! ships for, compiled at wheel-build time (`python -m gpu_tok._prebuilt`,
//! the JIT's own compiler) into `gpu_tok/kernels/` beside the core library,
//! so a user of those GPUs never waits for NVRTC.
//!
//! They are kernel-cache files (`jit`), named by source hash, arch and the
//! NVRTC that built them; a file counts only when its source hash is this
//! binary's, so a stale folder is ignored, never loaded. Which CUBIN a device
//! loads, and the fallback to the JIT when the driver refuses one, is here too
//! (`load_kernels`).

use super::jit::{self, Cubin, Origin};
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The built-in kernels for a device of `arch`, loaded by `load` (the
/// driver's `cuModuleLoadData`): the package's prebuilt CUBIN when one
/// matches, else the cached or freshly compiled one (`jit::kernels_cubin`).
pub fn load_kernels<M>(arch: &str, load: impl FnMut(&[u8]) -> Result<M>) -> Result<(M, Cubin)> {
    let prebuilt = dir();
    load_first(
        arch,
        prebuilt.as_deref(),
        &jit::cache_dir(),
        jit::kernels_cubin,
        load,
    )
}

/// `load_kernels` with its folders and compiler given. An image `load`
/// refuses is passed over, so a bad file never costs the GPU: a prebuilt
/// one for the cache (the shipped file is left alone), a cached one is
/// deleted and compiled again once.
pub fn load_first<M>(
    arch: &str,
    prebuilt_dir: Option<&Path>,
    cache: &Path,
    jit: impl Fn(&str, &Path) -> Result<Cubin>,
    mut load: impl FnMut(&[u8]) -> Result<M>,
) -> Result<(M, Cubin)> {
    for cubin in prebuilt_dir.map_or_else(Vec::new, |dir| found(arch, dir)) {
        if let Ok(module) = load(&cubin.image) {
            return Ok((module, cubin));
        }
    }
    let mut cubin = jit(arch, cache)?;
    let mut loaded = load(&cubin.image);
    if loaded.is_err() && cubin.origin == Origin::Cache {
        let _ = std::fs::remove_file(&cubin.path);
        cubin = jit(arch, cache)?;
        loaded = load(&cubin.image);
    }
    Ok((loaded?, cubin))
}

/// `kernels/` beside the loaded core library (`gpu_tok/kernels/` in an
/// installed package), or None where the library's path is unknown.
pub fn dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| Some(library_path()?.parent()?.join("kernels")))
        .clone()
}

/// The prebuilt CUBIN for `arch` in `dir` a device tries first (the newest
/// NVRTC's), if one of the built-in sources is there and looks like a CUBIN
/// (the driver has the last word).
pub fn find(arch: &str, dir: &Path) -> Option<Cubin> {
    found(arch, dir).into_iter().next()
}

/// Every prebuilt CUBIN of the built-in sources for `arch` in `dir` that
/// looks like one, the newest NVRTC's first (by version: 13.10 after 13.9):
/// a driver older than that NVRTC refuses its CUBIN, and the next is tried.
fn found(arch: &str, dir: &Path) -> Vec<Cubin> {
    let prefix = jit::cubin_prefix(arch);
    let mut paths: Vec<(Option<(u32, u32)>, PathBuf)> = files(dir)
        .into_iter()
        .filter(|path| file_name(path).starts_with(&prefix))
        .map(|path| (nvrtc_version(&file_name(&path)[prefix.len()..]), path))
        .collect();
    paths.sort_by(|a, b| b.cmp(a));
    paths
        .into_iter()
        .filter_map(|(_, path)| {
            let image = std::fs::read(&path).ok()?;
            jit::looks_like_cubin(&image).then_some(Cubin {
                image,
                path,
                origin: Origin::Prebuilt,
            })
        })
        .collect()
}

/// (major, minor) of "nvrtc13.10.cubin", the end of a kernel-cache file's name.
fn nvrtc_version(rest: &str) -> Option<(u32, u32)> {
    let version = rest.strip_prefix("nvrtc")?.strip_suffix(".cubin")?;
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// (arch, path) of every prebuilt CUBIN of the built-in sources in `dir`,
/// by SM (sm_80 before sm_100); files of other sources are left out.
pub fn list(dir: &Path) -> Vec<(String, PathBuf)> {
    let prefix = jit::sources_prefix();
    let mut found: Vec<(String, PathBuf)> = files(dir)
        .into_iter()
        .filter_map(|path| {
            let rest = file_name(&path).strip_prefix(&prefix)?;
            let arch = rest.split_once('-')?.0.to_string();
            Some((arch, path))
        })
        .collect();
    found.sort_by_key(|(arch, path)| (sm_number(arch), arch.clone(), path.clone()));
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

/// 90 for "sm_90" and "sm_90a" (0 for a name without one), for ordering.
fn sm_number(arch: &str) -> u32 {
    let digits: String = arch
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(0)
}

/// The `.cubin` files in `dir` (none when it cannot be read).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "cubin"))
        .collect()
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// The file this code was loaded from, as the dynamic loader reports it.
#[cfg(unix)]
fn library_path() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let here: fn() -> Option<PathBuf> = library_path;
    // SAFETY: an all-zero Dl_info is valid (null pointers); dladdr only reads
    // the address and fills `info`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `here` is an address inside this library; `info` is a valid out-pointer.
    if unsafe { libc::dladdr(here as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: dladdr set `dli_fname` to a NUL-terminated path owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

#[cfg(not(unix))]
fn library_path() -> Option<PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    const ELF: &[u8] = b"\x7fELF fake cubin";

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gt-prebuilt-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(dir: &Path, name: &str, image: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, image).unwrap();
        path
    }

    fn current(arch: &str) -> String {
        format!("{}nvrtc13.0.cubin", jit::cubin_prefix(arch))
    }

    #[test]
    fn lists_and_finds_only_the_built_in_sources() {
        let dir = folder("list");
        let sm80 = write(&dir, &current("sm_80"), ELF);
        let sm90 = write(&dir, &current("sm_90"), ELF);
        let sm100 = write(&dir, &current("sm_100"), ELF);
        write(&dir, "gt_batch-0123456789abcdef-sm_86-nvrtc13.0.cubin", ELF); // stale sources
        write(&dir, "notes.txt", b"x");
        assert_eq!(
            list(&dir),
            vec![
                ("sm_80".to_string(), sm80.clone()),
                ("sm_90".into(), sm90),
                ("sm_100".into(), sm100)
            ]
        );
        assert_eq!(find("sm_80", &dir).map(|c| c.path), Some(sm80));
        assert!(
            find("sm_86", &dir).is_none(),
            "a stale source hash is ignored"
        );
        assert!(find("sm_8", &dir).is_none(), "the arch matches whole");
        assert!(list(&dir.join("missing")).is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_newest_nvrtc_is_tried_first_by_version_not_by_name() {
        let dir = folder("versions");
        let name = |version: &str| format!("{}nvrtc{version}.cubin", jit::cubin_prefix("sm_90"));
        let newest = b"\x7fELF 13.10";
        for (version, image) in [
            ("13.9", &b"\x7fELF 13.9"[..]),
            ("13.10", newest),
            ("13.0", b"\x7fELF 13.0"),
        ] {
            write(&dir, &name(version), image);
        }
        // "13.10" sorts before "13.9" as text.
        assert_eq!(
            find("sm_90", &dir).map(|c| c.path),
            Some(dir.join(name("13.10")))
        );
        // A driver older than the newest NVRTC refuses its CUBIN: the next
        // prebuilt one is tried before any compile.
        let cache = dir.join("cache");
        let (loaded, compiles, seen) = load(&dir, &cache, &[newest]);
        assert_eq!(
            loaded.unwrap(),
            (b"\x7fELF 13.9".to_vec(), Origin::Prebuilt)
        );
        assert_eq!((compiles, seen.len()), (0, 2));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_cubin_is_not_found() {
        let dir = folder("corrupt");
        write(&dir, &current("sm_90"), b"garbage");
        assert!(find("sm_90", &dir).is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// What `load` saw: the loaded image and its origin, the compiles, and
    /// every image offered to the driver.
    type Attempt = (Result<(Vec<u8>, Origin)>, usize, Vec<Vec<u8>>);

    /// `load_first` with a fake compiler (no NVRTC needed) and a fake
    /// driver that refuses the images listed in `refused`.
    fn load(prebuilt: &Path, cache: &Path, refused: &[&[u8]]) -> Attempt {
        let compiles = std::cell::Cell::new(0);
        let mut seen = Vec::new();
        let result = load_first(
            "sm_90",
            Some(prebuilt),
            cache,
            |_, _| {
                compiles.set(compiles.get() + 1);
                Ok(Cubin {
                    image: b"\x7fELF compiled".to_vec(),
                    path: cache.join("compiled.cubin"),
                    origin: Origin::Compiled,
                })
            },
            |image: &[u8]| {
                seen.push(image.to_vec());
                if refused.contains(&image) {
                    Err(Error::Cuda("refused".into()))
                } else {
                    Ok(image.to_vec())
                }
            },
        )
        .map(|(image, cubin)| (image, cubin.origin));
        (result, compiles.get(), seen)
    }

    #[test]
    fn a_device_loads_the_prebuilt_cubin_else_falls_back_to_the_jit() {
        let dir = folder("load");
        let cache = dir.join("cache");
        let (loaded, compiles, _) = load(&dir, &cache, &[]);
        assert_eq!(loaded.unwrap().1, Origin::Compiled, "no prebuilt file");
        assert_eq!(compiles, 1);

        write(&dir, &current("sm_90"), ELF);
        let (loaded, compiles, _) = load(&dir, &cache, &[]);
        assert_eq!(loaded.unwrap(), (ELF.to_vec(), Origin::Prebuilt));
        assert_eq!(compiles, 0, "a matching prebuilt CUBIN needs no NVRTC");

        let (loaded, compiles, seen) = load(&dir, &cache, &[ELF]);
        assert_eq!(loaded.unwrap().1, Origin::Compiled, "refused by the driver");
        assert_eq!((compiles, seen.len()), (1, 2));
        assert!(
            dir.join(current("sm_90")).exists(),
            "a shipped file is never deleted"
        );

        write(&dir, &current("sm_90"), b"garbage");
        let (loaded, _, seen) = load(&dir, &cache, &[]);
        assert_eq!(loaded.unwrap().1, Origin::Compiled);
        assert_eq!(
            seen,
            vec![b"\x7fELF compiled".to_vec()],
            "the driver never sees garbage"
        );

        let (loaded, compiles, _) = load(&dir, &cache, &[b"\x7fELF compiled"]);
        assert!(
            matches!(loaded, Err(Error::Cuda(_))),
            "every candidate refused"
        );
        assert_eq!(compiles, 1, "a compiled image is not compiled again");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_refused_cached_cubin_is_deleted_and_compiled_again() {
        let dir = folder("cache");
        let stale = write(&dir, "cached.cubin", ELF);
        let calls = std::cell::Cell::new(0);
        let (image, cubin) = load_first(
            "sm_90",
            None,
            &dir,
            |_, _| {
                calls.set(calls.get() + 1);
                let (image, origin) = if stale.exists() {
                    (ELF.to_vec(), Origin::Cache)
                } else {
                    (b"\x7fELF fresh".to_vec(), Origin::Compiled)
                };
                Ok(Cubin {
                    image,
                    path: stale.clone(),
                    origin,
                })
            },
            |image: &[u8]| {
                if image == ELF {
                    Err(Error::Cuda("refused".into()))
                } else {
                    Ok(image.to_vec())
                }
            },
        )
        .unwrap();
        assert_eq!(
            (image.as_slice(), cubin.origin),
            (&b"\x7fELF fresh"[..], Origin::Compiled)
        );
        assert_eq!(calls.get(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
