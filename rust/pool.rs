//! The engine's own thread pool, and nothing else.
//!
//! Why our own pool: `tokenizers` uses rayon's global pool, whose threads do not
//! survive `fork`; a child that touches it deadlocks. Ours remembers the pid that
//! built it: in a forked child the inherited pool is leaked (its threads do not
//! exist there, and dropping it could wait on locks held at fork time) and a new
//! one is built. The pool is published through an atomic pointer, never a lock,
//! so a fork in the middle of another thread's call cannot leave a lock held.
//!
//! Size: `GPU_TOK_NUM_THREADS`, else `RAYON_NUM_THREADS`, else all cores;
//! `TOKENIZERS_PARALLELISM=false` (as `tokenizers` users set it) means one thread.
//! Read when the pool is built: at first use and again in each forked child.

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// A thread pool bound to the process that built it.
pub struct Pool {
    pid: u32,
    threads: usize,
    /// `None` when one thread is configured: work then runs on the caller's thread.
    rayon: Option<rayon::ThreadPool>,
}

static CURRENT: AtomicPtr<Pool> = AtomicPtr::new(std::ptr::null_mut());

/// Work below this many bytes of text runs on the caller's thread
/// (`Pool::map_sized`): on 2 cores the pool only caught up near 27 kB.
pub const INLINE_BYTES: usize = 16 << 10;

/// The pool for this process, built on first use and rebuilt after `fork`.
pub fn current() -> &'static Pool {
    let pid = std::process::id();
    let seen = CURRENT.load(Ordering::Acquire);
    // SAFETY: every pointer stored in CURRENT comes from Box::leak and is never freed.
    if let Some(pool) = unsafe { seen.as_ref() } {
        if pool.pid == pid {
            return pool;
        }
    }
    let fresh: &'static mut Pool = Box::leak(Box::new(Pool::build(pid)));
    match CURRENT.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fresh,
        // Another thread published a pool first; use it. Ours stays leaked: this
        // happens at most once per racing thread per process.
        // SAFETY: as above, published pointers are leaked boxes.
        Err(winner) => unsafe { &*winner },
    }
}

/// Threads the configuration asks for (see the module docs).
pub fn configured_threads() -> usize {
    let from_env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
    };
    let parallelism_off = std::env::var("TOKENIZERS_PARALLELISM")
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "false" | "0" | "off" | "no"
            )
        })
        .unwrap_or(false);
    if parallelism_off {
        return 1;
    }
    from_env("GPU_TOK_NUM_THREADS")
        .or_else(|| from_env("RAYON_NUM_THREADS"))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Pool {
    fn build(pid: u32) -> Self {
        let threads = configured_threads();
        let rayon = if threads > 1 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("gpu_tok-{i}"))
                .build()
                .ok()
        } else {
            None
        };
        let threads = if rayon.is_some() { threads } else { 1 };
        Pool {
            pid,
            threads,
            rayon,
        }
    }

    /// Number of worker threads (1 means the caller's thread does the work).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// `map` for work of about `bytes` bytes of text: below `INLINE_BYTES` it
    /// runs on the caller's thread, since waking the workers costs more than
    /// they save there and they spin a while after (32 sentences, 3 kB, took
    /// 2.2x the CPU on 2 threads as on the caller's alone, and longer).
    pub fn map_sized<T, E, F>(&self, n: usize, bytes: usize, f: F) -> Result<Vec<T>, E>
    where
        T: Send,
        E: Send,
        F: Fn(usize) -> Result<T, E> + Sync + Send,
    {
        match bytes < INLINE_BYTES {
            true => (0..n).map(f).collect(),
            false => self.map(n, f),
        }
    }

    /// `f(0..n)` for items of `sizes[i]` bytes of text, results in index
    /// order: largest first, each worker taking the next item when it is
    /// done with one (a shared counter), so the call ends with the small
    /// items and no worker waits on another's long queue. `map` splits by
    /// count into halves and quarters that run to their end on one worker:
    /// on fresh text a half holding the set's long documents kept one core
    /// busy while the other waited (the batch9 round in benches/README).
    /// Below `INLINE_BYTES` in all it runs on the caller's thread. After an
    /// error the workers take no new item; the error of the lowest index
    /// among those computed wins.
    pub fn map_by_size<T, E, F>(&self, sizes: &[usize], f: F) -> Result<Vec<T>, E>
    where
        T: Send,
        E: Send,
        F: Fn(usize) -> Result<T, E> + Sync + Send,
    {
        let n = sizes.len();
        let bytes = sizes.iter().fold(0usize, |sum, &b| sum.saturating_add(b));
        let pool = match &self.rayon {
            Some(pool) if n > 1 && bytes >= INLINE_BYTES => pool,
            _ => return (0..n).map(f).collect(),
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        // As many takers as items or threads, whichever is fewer: a small
        // batch does not wait for every thread of a large pool to be scheduled.
        let takers = n.min(self.threads.max(1));
        let take = |_| {
            let mut mine = Vec::new();
            while !failed.load(Ordering::Relaxed) {
                let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    break;
                };
                let result = f(i);
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                mine.push((i, result));
            }
            mine
        };
        let done: Vec<Vec<(usize, Result<T, E>)>> =
            pool.install(|| (0..takers).into_par_iter().map(take).collect());
        let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
        let mut first_error: Option<(usize, E)> = None;
        for (i, result) in done.into_iter().flatten() {
            match result {
                Ok(value) => slots[i] = Some(value),
                Err(err) if first_error.as_ref().is_none_or(|(j, _)| i < *j) => {
                    first_error = Some((i, err))
                }
                Err(_) => {}
            }
        }
        if let Some((_, err)) = first_error {
            return Err(err);
        }
        // Without an error every index was taken once.
        Ok(slots
            .into_iter()
            .map(|slot| slot.expect("every item computed"))
            .collect())
    }

    /// `f(0..n)` in parallel, results in index order; the first error wins.
    pub fn map<T, E, F>(&self, n: usize, f: F) -> Result<Vec<T>, E>
    where
        T: Send,
        E: Send,
        F: Fn(usize) -> Result<T, E> + Sync + Send,
    {
        match &self.rayon {
            Some(pool) if n > 1 => pool.install(|| (0..n).into_par_iter().map(&f).collect()),
            _ => (0..n).map(f).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_order_and_propagates_errors() {
        let pool = current();
        let squares: Result<Vec<usize>, ()> = pool.map(1000, |i| Ok(i * i));
        assert_eq!(
            squares.unwrap(),
            (0..1000).map(|i| i * i).collect::<Vec<_>>()
        );
        let failed: Result<Vec<usize>, String> = pool.map(100, |i| {
            if i == 37 {
                Err(format!("bad {i}"))
            } else {
                Ok(i)
            }
        });
        assert_eq!(failed.unwrap_err(), "bad 37");
    }

    #[test]
    fn small_work_runs_on_the_callers_thread() {
        let caller = std::thread::current().id();
        let on_caller = |bytes| -> Vec<bool> {
            current()
                .map_sized(64, bytes, |_| {
                    Ok::<_, ()>(std::thread::current().id() == caller)
                })
                .unwrap()
        };
        assert!(on_caller(INLINE_BYTES - 1).iter().all(|&here| here));
        if current().threads() > 1 {
            // The pool's workers take large work (the caller waits for them).
            assert!(on_caller(INLINE_BYTES).iter().all(|&here| !here));
        }
    }

    #[test]
    fn map_by_size_keeps_order_and_propagates_errors() {
        let pool = current();
        let sizes: Vec<usize> = (0..1000).map(|i| (i * 7919) % 1000 * 100).collect();
        let squares: Result<Vec<usize>, ()> = pool.map_by_size(&sizes, |i| Ok(i * i));
        assert_eq!(
            squares.unwrap(),
            (0..1000).map(|i| i * i).collect::<Vec<_>>()
        );
        let failed: Result<Vec<usize>, String> = pool.map_by_size(&sizes, |i| {
            if i == 37 {
                Err(format!("bad {i}"))
            } else {
                Ok(i)
            }
        });
        assert_eq!(failed.unwrap_err(), "bad 37");
        let none: Result<Vec<usize>, ()> = pool.map_by_size(&[], Ok);
        assert!(none.unwrap().is_empty());
    }

    #[test]
    fn map_by_size_runs_small_work_on_the_callers_thread() {
        let caller = std::thread::current().id();
        let on_caller = |size| -> Vec<bool> {
            current()
                .map_by_size(&[size, 0], |_| {
                    Ok::<_, ()>(std::thread::current().id() == caller)
                })
                .unwrap()
        };
        assert!(on_caller(INLINE_BYTES - 1).iter().all(|&here| here));
        if current().threads() > 1 {
            assert!(on_caller(INLINE_BYTES).iter().all(|&here| !here));
        }
    }

    #[test]
    fn pool_is_reused_within_a_process() {
        assert!(std::ptr::eq(current(), current()));
        assert!(current().threads() >= 1);
    }
}
