//! The behaviour every [`Storage`] backend must show. Call [`run`] from a backend's tests.

use super::Storage;
use crate::error::ErrorKind;

/// Panics with a description of the first rule the backend breaks. `storage` must be empty.
pub fn run(storage: &dyn Storage) {
    let kind = |r: crate::Result<()>| r.err().map(|e| e.kind());

    // Missing objects.
    assert_eq!(storage.read("nope").err().map(|e| e.kind()), Some(ErrorKind::NotFound), "read of a missing object");
    assert_eq!(storage.size("nope").err().map(|e| e.kind()), Some(ErrorKind::NotFound), "size of a missing object");
    assert!(!storage.exists("nope").expect("exists"), "exists of a missing object");
    storage.delete("nope").expect("deleting a missing object is not an error");

    // Write, read back, ranges.
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    storage.write_atomic("a/b/data.bin", &data).expect("write_atomic");
    assert_eq!(storage.read("a/b/data.bin").expect("read"), data);
    assert_eq!(storage.size("a/b/data.bin").expect("size"), data.len() as u64);
    assert!(storage.exists("a/b/data.bin").expect("exists"));
    assert_eq!(storage.read_range("a/b/data.bin", 100, 50).expect("range"), data[100..150]);
    assert_eq!(storage.read_range("a/b/data.bin", 0, 0).expect("empty range"), Vec::<u8>::new());
    assert_eq!(storage.read_range("a/b/data.bin", 9_990, 10).expect("tail"), data[9_990..]);
    assert_eq!(
        storage.read_range("a/b/data.bin", 9_990, 11).err().map(|e| e.kind()),
        Some(ErrorKind::Corruption),
        "a range past the end is Corruption, not a short read"
    );

    // Replace atomically.
    storage.write_atomic("a/b/data.bin", b"new").expect("replace");
    assert_eq!(storage.read("a/b/data.bin").expect("read"), b"new");
    assert_eq!(storage.read_range("a/b/data.bin", 0, 3).expect("range after replace"), b"new");

    // Positional writes into a shared file, in any order, gaps read as zeros.
    storage.write_at("p/shared.bin", 10, b"world").expect("write_at");
    storage.write_at("p/shared.bin", 0, b"hello").expect("write_at at 0");
    storage.sync("p/shared.bin", 20).expect("sync extends");
    let shared = storage.read("p/shared.bin").expect("read shared");
    assert_eq!(shared.len(), 20, "sync extends the file to the length given");
    assert_eq!(&shared[..15], b"hello\0\0\0\0\0world");
    assert_eq!(storage.read_range("p/shared.bin", 10, 5).expect("range of shared"), b"world");
    storage.delete("p/shared.bin").expect("delete shared");

    // Exclusive create.
    storage.create_new("m/v1.json", b"one").expect("create_new");
    assert_eq!(kind(storage.create_new("m/v1.json", b"two")), Some(ErrorKind::Conflict), "second create_new");
    assert_eq!(storage.read("m/v1.json").expect("read"), b"one", "a failed create_new leaves the first bytes");

    // A commit: a manifest made exclusively, then the pointer that names it; a conflict
    // leaves both as they were and no temporary file behind (the listing below counts).
    storage.create_new_then_replace("m/v3.json", b"three", "m/head", b"3").expect("create then replace");
    assert_eq!(storage.read("m/head").expect("read pointer"), b"3");
    let again = storage.create_new_then_replace("m/v3.json", b"x", "m/head", b"x");
    assert_eq!(kind(again), Some(ErrorKind::Conflict), "second create_new_then_replace");
    assert_eq!(storage.read("m/v3.json").expect("read"), b"three");
    assert_eq!(storage.read("m/head").expect("read pointer"), b"3", "a conflict leaves the pointer");
    storage.delete("m/v3.json").expect("delete");
    storage.delete("m/head").expect("delete");

    // Listing.
    storage.write_atomic("m/v2.json", b"2").expect("write");
    assert_eq!(storage.list("m/").expect("list"), vec!["m/v1.json".to_string(), "m/v2.json".to_string()]);
    assert_eq!(storage.list("zzz/").expect("list"), Vec::<String>::new());
    assert_eq!(storage.list("").expect("list all").len(), 3, "temporary files never show");
    // The names under the root, sorted, each once: those of every object, and on storage
    // that has directories also the empty ones (`p`, emptied above, may show).
    let top = storage.top_level().expect("top level");
    assert!(top.windows(2).all(|w| w[0] < w[1]), "top level sorted, each name once: {top:?}");
    assert!(["a", "m"].iter().all(|n| top.iter().any(|t| t == n)), "top level misses an object's name: {top:?}");
    assert!(top.iter().all(|t| ["a", "m", "p"].contains(&t.as_str())), "top level names no object: {top:?}");

    // Delete.
    storage.delete("m/v2.json").expect("delete");
    assert!(!storage.exists("m/v2.json").expect("exists"));

    // Paths that could escape the root are refused.
    for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b"] {
        assert_eq!(
            storage.read(bad).err().map(|e| e.kind()),
            Some(ErrorKind::InvalidArgument),
            "path '{bad}' must be refused"
        );
    }

    // Concurrent readers of ranges.
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 256) as u8).collect();
    storage.write_atomic("big.bin", &big).expect("write big");
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let big = &big;
            s.spawn(move || {
                for i in 0..50u64 {
                    let off = (t * 97_001 + i * 13_337) % 900_000;
                    let got = storage.read_range("big.bin", off, 4096).expect("concurrent range");
                    assert_eq!(got, big[off as usize..off as usize + 4096]);
                }
            });
        }
    });
}
