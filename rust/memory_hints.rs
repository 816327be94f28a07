//! Memory hints for large tables read at random: transparent huge pages
//! (one TLB entry per 2 MB instead of per 4 kB; a random read of an 8 MB
//! table otherwise misses the TLB as well as the cache) and prefetches.
//! Hints only: nothing here changes what memory holds.

/// A table of `len` copies of `value` whose memory the kernel is asked,
/// before it is first touched, to back with huge pages where it can (Linux;
/// elsewhere, and where transparent huge pages are off, a plain Vec).
pub fn filled<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut table: Vec<T> = Vec::with_capacity(len);
    advise(table.as_ptr().cast(), len * std::mem::size_of::<T>());
    table.resize(len, value);
    table
}

fn advise(start: *const u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = start as usize;
        let end = start + bytes;
        // madvise wants a page-aligned start; the allocator's header puts
        // large allocations a few bytes past one, so round inward.
        let aligned = start.next_multiple_of(PAGE);
        if end > aligned + PAGE {
            // SAFETY: the range lies inside one live allocation; the advice
            // neither reads nor writes it.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    end - aligned,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// Asks for the cache line at `at` ahead of a read (a hint: no fault, no effect
/// on what is read).
#[inline(always)]
pub fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees; SSE
    // is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
