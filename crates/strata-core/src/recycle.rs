//! Result columns handed back for the next result. A points result of hundreds of MB is
//! built in columns that Python then owns; glibc maps buffers that large afresh and unmaps
//! them when they are freed, so every query's columns were new pages the kernel had to
//! fault in and zero: on ERSST x4 at 90% (520 MB of columns) that was a third of
//! `Dataset.query`'s time, while SQL's per-piece batches come from malloc's heap and reuse
//! its pages. A column whose last reader is gone comes back here with its pages marked
//! free (`MADV_FREE`: the kernel takes them back when it needs memory, else they stay and
//! cost nothing to write again), and the next result's columns start in it.

use std::sync::Mutex;

/// Columns smaller than this are left to malloc, whose heap reuses them already.
const MIN_BYTES: usize = 4 << 20;
/// At most this many columns and bytes wait per element type; the oldest go first: a
/// result has a few large columns, and columns that no later result fits must not pile up.
const MAX_COLUMNS: usize = 6;
const MAX_BYTES: usize = 1 << 30;

/// Element types whose columns come back (one pool each: a buffer is freed with the
/// alignment it was allocated with).
pub trait Recyclable: Copy + Send + 'static {
    #[doc(hidden)]
    fn pool() -> &'static Mutex<Vec<Vec<Self>>>;
}

macro_rules! recyclable {
    ($($t:ty),*) => {$(
        impl Recyclable for $t {
            fn pool() -> &'static Mutex<Vec<Vec<$t>>> {
                static POOL: Mutex<Vec<Vec<$t>>> = Mutex::new(Vec::new());
                &POOL
            }
        }
    )*};
}
recyclable!(u8, u64);

fn bytes<T>(v: &Vec<T>) -> usize {
    v.capacity().saturating_mul(size_of::<T>())
}

/// Hands a column back once nothing reads it (its contents are not kept).
pub fn recycle<T: Recyclable>(mut v: Vec<T>) {
    if bytes(&v) < MIN_BYTES {
        return;
    }
    v.clear();
    release_pages(v.as_ptr() as usize, bytes(&v));
    let mut pool = T::pool().lock().unwrap_or_else(|p| p.into_inner());
    pool.push(v);
    let mut total: usize = pool.iter().map(bytes).sum();
    while total > MAX_BYTES || pool.len() > MAX_COLUMNS {
        total -= bytes(&pool.remove(0));
    }
}

/// An empty vector with room for at least `len` elements, from the columns handed back:
/// the smallest that fits, unless it is more than twice as large (its resident pages would
/// be held for nothing). None when none fits, or `len` is small.
pub(crate) fn take<T: Recyclable>(len: usize) -> Option<Vec<T>> {
    if len.saturating_mul(size_of::<T>()) < MIN_BYTES {
        return None;
    }
    let mut pool = T::pool().lock().unwrap_or_else(|p| p.into_inner());
    let fits = |v: &Vec<T>| (len..=len.saturating_mul(2)).contains(&v.capacity());
    let i = (0..pool.len()).filter(|&i| fits(&pool[i])).min_by_key(|&i| pool[i].capacity())?;
    Some(pool.swap_remove(i))
}

/// Lets the kernel drop the pages' contents (MADV_FREE): a page it dropped reads as zeros
/// when touched again, so the buffer, which holds no elements, stays valid.
fn release_pages(addr: usize, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
        crate::large::advise_within(addr, len, page, libc::MADV_FREE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (addr, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_come_back_to_a_result_of_about_their_size() {
        let mut v: Vec<u64> = Vec::with_capacity(1 << 21); // 16 MiB
        v.extend(0..1000);
        let at = v.as_ptr();
        recycle(v);
        assert!(take::<u64>(1 << 10).is_none(), "small results are malloc's");
        assert!(take::<u64>(600_000).is_none(), "more than twice the result");
        let again = take::<u64>(1_100_000).expect("the column handed back");
        assert_eq!((again.as_ptr(), again.len()), (at, 0));
        assert!(again.capacity() >= 1 << 21);
        assert!(take::<u64>(1_100_000).is_none(), "taken once");
        // Written again in full after its pages were released.
        let mut again = again;
        again.extend(0..(1u64 << 21));
        assert_eq!(again[12345], 12345);
        recycle(vec![0u8; 100]); // small: dropped, not kept
        assert!(take::<u8>(100).is_none());
        recycle(again);
        assert!(take::<u64>(3 << 20).is_none(), "too small for the result");
        assert!(take::<u64>(1_100_000).is_some(), "still there for a result it fits");
        // No more than MAX_COLUMNS wait.
        for _ in 0..MAX_COLUMNS + 3 {
            recycle(Vec::<u8>::with_capacity(5 << 20));
        }
        assert_eq!(u8::pool().lock().unwrap().len(), MAX_COLUMNS);
    }
}
