//! A points result joined into whole columns as its pieces arrive. Pieces run a round at a
//! time; once a round is done, each piece's rows get their place at the end of every
//! column, and the pieces are written there side by side on the worker threads while the
//! next round runs. Nothing is copied twice and no thread joins alone: on 13M points,
//! joining pieces afterwards on one thread (NumPy's `concatenate`) took a fifth of the
//! query, and picking coordinates onto the columns' ends on the calling thread left that
//! thread the bottleneck (the workers idle half the time).

use crate::area::AuxPick;
use crate::error::{Error, Result};
use crate::nontemporal;
use crate::points::{divisors, pick_bytes, write_all};
use crate::query::Points;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// What a joined result holds besides the returned variables' values.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// Per dimension of the grid, the coordinate's values to pick at each point: its
    /// elements' native-order bytes and their size (1, 2, 4 or 8).
    pub coordinates: Vec<Option<(Vec<u8>, usize)>>,
    /// Per dimension, whether to keep the index along it.
    pub indices: Vec<bool>,
    /// Whether to keep the flat indices.
    pub flat: bool,
    /// Auxiliary coordinates (2-D lat/lon) to give at each point.
    pub aux: Vec<AuxPick>,
}

/// A points result's columns, each one contiguous vector.
#[derive(Debug, Default)]
pub struct Joined {
    /// Row-major flat indices (empty unless asked for).
    pub flat: Vec<u64>,
    /// Per dimension, the coordinate's bytes at each point (empty unless asked for).
    pub coordinates: Vec<Vec<u8>>,
    /// Per dimension, the index along it (empty unless asked for).
    pub indices: Vec<Vec<u64>>,
    /// Per returned variable, its elements' bytes.
    pub values: Vec<Vec<u8>>,
    /// Per auxiliary coordinate asked for, its values' bytes at each point.
    pub aux: Vec<Vec<u8>>,
    grid: Vec<u64>,
    columns: Columns,
    /// Bytes per element of each returned variable.
    widths: Vec<usize>,
    /// Whether the columns are written around the cache (see [`STREAMED_BYTES`]).
    streamed: bool,
}

/// Results whose room is at least this large (the L3 cache of the machines measured) are
/// written around the cache ([`nontemporal`]): on ERSST at 90% (130 MB of columns) that
/// took `Dataset.query` from 1.12-1.13x SQL's time to 1.04-1.06x. A smaller result may
/// still be in the cache when the caller reads it, and is written as usual.
const STREAMED_BYTES: usize = 32 << 20;

/// One piece's places in every column.
struct Places<'a> {
    flat: Option<&'a mut [MaybeUninit<u64>]>,
    coordinates: Vec<Option<&'a mut [MaybeUninit<u8>]>>,
    indices: Vec<Option<&'a mut [MaybeUninit<u64>]>>,
    values: Vec<&'a mut [MaybeUninit<u8>]>,
    aux: Vec<&'a mut [MaybeUninit<u8>]>,
}

impl Joined {
    /// An empty result over a grid of `grid`'s shape, returning variables of `widths`
    /// bytes per element.
    pub fn new(grid: Vec<u64>, columns: Columns, widths: Vec<usize>) -> Result<Joined> {
        let nd = grid.len();
        if columns.coordinates.len() != nd || columns.indices.len() != nd {
            return Err(Error::InvalidArgument(format!("coordinates and indices name each of the {nd} dimensions")));
        }
        for (d, c) in columns.coordinates.iter().enumerate() {
            if let Some((values, size)) = c {
                if ![1, 2, 4, 8].contains(size) || values.len() as u64 != grid[d] * *size as u64 {
                    return Err(Error::InvalidArgument(format!(
                        "coordinate values must hold {} elements of 1, 2, 4 or 8 bytes",
                        grid[d]
                    )));
                }
            }
        }
        Ok(Joined {
            flat: Vec::new(),
            coordinates: vec![Vec::new(); nd],
            indices: vec![Vec::new(); nd],
            values: vec![Vec::new(); widths.len()],
            aux: vec![Vec::new(); columns.aux.len()],
            grid,
            columns,
            widths,
            streamed: false,
        })
    }

    /// Per dimension, whether its coordinate values and its indices were asked for.
    pub fn asked(&self) -> Vec<(bool, bool)> {
        self.columns.coordinates.iter().map(Option::is_some).zip(self.columns.indices.iter().copied()).collect()
    }

    /// Whether no row has been added.
    pub fn is_empty(&self) -> bool {
        self.flat.is_empty() && self.values.iter().chain(&self.aux).chain(&self.coordinates).all(Vec::is_empty)
    }

    /// Makes room for `rows` more rows in every kept column, if memory allows: a column
    /// that has to grow later is copied to its new place. Rows beyond what is added cost
    /// address space only (their pages are never touched).
    pub fn reserve(&mut self, rows: usize) {
        let Joined { flat, coordinates, indices, values, aux, columns, widths, .. } = self;
        let row_bytes = 8 * (columns.flat as usize + columns.indices.iter().filter(|&&k| k).count())
            + columns.coordinates.iter().flatten().map(|(_, size)| size).sum::<usize>()
            + widths.iter().sum::<usize>()
            + columns.aux.iter().map(AuxPick::itemsize).sum::<usize>();
        self.streamed = rows.saturating_mul(row_bytes) >= STREAMED_BYTES;
        if columns.flat {
            crate::large::try_reserve(flat, rows);
        }
        for (column, c) in coordinates.iter_mut().zip(&columns.coordinates) {
            if let Some((_, size)) = c {
                crate::large::try_reserve(column, rows.saturating_mul(*size));
            }
        }
        for (column, &kept) in indices.iter_mut().zip(&columns.indices) {
            if kept {
                crate::large::try_reserve(column, rows);
            }
        }
        for (column, width) in values.iter_mut().zip(widths.iter()) {
            crate::large::try_reserve(column, rows.saturating_mul(*width));
        }
        for (column, a) in aux.iter_mut().zip(&columns.aux) {
            crate::large::try_reserve(column, rows.saturating_mul(a.itemsize()));
        }
    }

    /// Appends a round of pieces, in order, writing them on the worker threads.
    pub fn add(&mut self, round: &[Points]) -> Result<()> {
        let total: u64 = self.grid.iter().product();
        for p in round {
            if p.columns.len() != self.values.len() {
                return Err(Error::InvalidArgument(format!(
                    "a piece has {} columns, not {}",
                    p.columns.len(),
                    self.values.len()
                )));
            }
        }
        let rows: Vec<usize> = round.iter().map(|p| p.flat.len()).collect();
        let Joined { flat, coordinates, indices, values, aux, grid, columns, streamed, .. } = self;
        let streamed = *streamed;
        // Each column's spare room, carved into one place per piece.
        let mut places: Vec<Places> = round
            .iter()
            .map(|_| Places {
                flat: None,
                coordinates: Vec::new(),
                indices: Vec::new(),
                values: Vec::new(),
                aux: Vec::new(),
            })
            .collect();
        if columns.flat {
            for (p, s) in places.iter_mut().zip(carve(flat, rows.iter().copied())) {
                p.flat = Some(s);
            }
        }
        for (column, c) in coordinates.iter_mut().zip(&columns.coordinates) {
            let mut slices = c.as_ref().map(|(_, size)| carve(column, rows.iter().map(|n| n * size)).into_iter());
            places.iter_mut().for_each(|p| p.coordinates.push(slices.as_mut().and_then(Iterator::next)));
        }
        for (column, &kept) in indices.iter_mut().zip(&columns.indices) {
            let mut slices = kept.then(|| carve(column, rows.iter().copied()).into_iter());
            places.iter_mut().for_each(|p| p.indices.push(slices.as_mut().and_then(Iterator::next)));
        }
        for (v, column) in values.iter_mut().enumerate() {
            for (p, s) in places.iter_mut().zip(carve(column, round.iter().map(|p| p.columns[v].len()))) {
                p.values.push(s);
            }
        }
        for (column, a) in aux.iter_mut().zip(&columns.aux) {
            for (p, s) in places.iter_mut().zip(carve(column, rows.iter().map(|n| n * a.itemsize()))) {
                p.aux.push(s);
            }
        }
        // Each piece's flat indices are checked on the thread that fills its rows: a pass over
        // 8 bytes a row, which on the calling thread alone held up every round of a large
        // result (26M rows: about 30 ms of a 400 ms query).
        round.par_iter().zip(places).try_for_each(|(piece, places)| {
            if piece.flat.iter().any(|&f| f >= total) {
                return Err(Error::InvalidArgument(format!("a flat index is outside the grid of {total} elements")));
            }
            fill(grid, columns, piece, places, streamed)
        })?;
        // SAFETY: `carve` handed out exactly the next elements of each column's spare
        // room, one slice per piece, and `fill` wrote every element of every slice: a
        // slice holds one element (or one coordinate's bytes) per row of its piece, or
        // its piece's value bytes, and `fill` writes them all. An error or a panic in
        // `fill` leaves before this point with the lengths unchanged.
        let rows: usize = rows.iter().sum();
        if columns.flat {
            unsafe { flat.set_len(flat.len() + rows) };
        }
        for (column, c) in coordinates.iter_mut().zip(&columns.coordinates) {
            if let Some((_, size)) = c {
                unsafe { column.set_len(column.len() + rows * size) };
            }
        }
        for (column, &kept) in indices.iter_mut().zip(&columns.indices) {
            if kept {
                unsafe { column.set_len(column.len() + rows) };
            }
        }
        for (v, column) in values.iter_mut().enumerate() {
            let bytes: usize = round.iter().map(|p| p.columns[v].len()).sum();
            unsafe { column.set_len(column.len() + bytes) };
        }
        for (column, a) in aux.iter_mut().zip(&columns.aux) {
            unsafe { column.set_len(column.len() + rows * a.itemsize()) };
        }
        Ok(())
    }
}

/// The next `sizes` spare elements of `column`, one slice per size, in order (room made
/// on huge pages, see [`crate::large`]).
fn carve<T>(column: &mut Vec<T>, sizes: impl Iterator<Item = usize> + Clone) -> Vec<&mut [MaybeUninit<T>]> {
    let total = sizes.clone().sum();
    crate::large::reserve(column, total);
    let mut rest = &mut column.spare_capacity_mut()[..total];
    sizes
        .map(|n| {
            let (here, after) = std::mem::take(&mut rest).split_at_mut(n);
            rest = after;
            here
        })
        .collect()
}

/// Writes one piece into its places, every element of every place (or fails); with
/// `streamed`, around the cache.
fn fill(grid: &[u64], spec: &Columns, piece: &Points, places: Places, streamed: bool) -> Result<()> {
    let filled = if streamed {
        fill_with::<true>(grid, spec, piece, places)
    } else {
        fill_with::<false>(grid, spec, piece, places)
    };
    if streamed {
        nontemporal::fence();
    }
    filled
}

fn fill_with<const STREAMED: bool>(grid: &[u64], spec: &Columns, piece: &Points, places: Places) -> Result<()> {
    fn put<T: nontemporal::Streamed, const STREAMED: bool>(slot: &mut MaybeUninit<T>, v: T) {
        if STREAMED {
            T::store(slot, v);
        } else {
            slot.write(v);
        }
    }
    if let Some(to) = places.flat {
        to.iter_mut().zip(&piece.flat).for_each(|(t, &f)| put::<_, STREAMED>(t, f));
    }
    for (d, to) in places.coordinates.into_iter().enumerate() {
        if let (Some(to), Some((values, size))) = (to, &spec.coordinates[d]) {
            // The flat indices were checked when the round was added.
            pick_bytes(values, *size, d, grid, &piece.flat, to, STREAMED)?;
        }
    }
    for (d, to) in places.indices.into_iter().enumerate() {
        let Some(to) = to else { continue };
        let (stride, extent) = divisors(d, grid);
        to.iter_mut().zip(&piece.flat).for_each(|(t, &f)| {
            let q = stride.quotient(f);
            put::<_, STREAMED>(t, q - extent.quotient(q) * extent.d);
        });
    }
    for (to, from) in places.values.into_iter().zip(&piece.columns) {
        if STREAMED {
            nontemporal::copy(to, from);
        } else {
            write_all(to, from);
        }
    }
    for (to, a) in places.aux.into_iter().zip(&spec.aux) {
        a.pick_into(grid, &piece.flat, to)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::points::{axis_indices, pick};

    /// Rounds of pieces (some empty) joined equal the columns built whole, written as
    /// usual or around the cache (room for a large result).
    #[test]
    fn rounds_join_to_the_columns_built_whole() {
        for room in [20, STREAMED_BYTES / 4] {
            join_rounds(room);
        }
    }

    fn join_rounds(room: usize) {
        let grid = vec![7u64, 6, 5];
        let flat: Vec<u64> = (0..210).filter(|f| f % 4 != 1 && f % 11 != 2).collect();
        let value = |f: u64| (f as f32 * 0.5).to_le_bytes();
        let lat: Vec<f32> = (0..6).map(|i| 60.0 - 10.0 * i as f32).collect();
        let time: Vec<u16> = (0..7).map(|i| 100 + i).collect();
        let columns = Columns {
            coordinates: vec![
                Some((time.iter().flat_map(|v| v.to_ne_bytes()).collect(), 2)),
                Some((lat.iter().flat_map(|v| v.to_ne_bytes()).collect(), 4)),
                None,
            ],
            indices: vec![false, true, true],
            flat: true,
            aux: vec![],
        };
        let mut joined = Joined::new(grid.clone(), columns, vec![4]).unwrap();
        // Pieces of 0, 1, 13, 0, 40, ... rows in rounds of three.
        let cuts = [0usize, 0, 1, 14, 14, 54, 90, 91, 130, flat.len()];
        let pieces: Vec<Points> = cuts
            .windows(2)
            .map(|w| Points {
                flat: flat[w[0]..w[1]].to_vec(),
                columns: vec![flat[w[0]..w[1]].iter().flat_map(|&f| value(f)).collect()],
            })
            .collect();
        joined.reserve(room);
        assert_eq!(joined.streamed, room > 20);
        for round in pieces.chunks(3) {
            joined.add(round).unwrap();
        }
        assert_eq!(joined.flat, flat);
        assert_eq!(joined.values[0], flat.iter().flat_map(|&f| value(f)).collect::<Vec<u8>>());
        let want_time: Vec<u8> = pick(&time, 0, &grid, &flat).iter().flat_map(|v| v.to_ne_bytes()).collect();
        let want_lat: Vec<u8> = pick(&lat, 1, &grid, &flat).iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(joined.coordinates[0], want_time);
        assert_eq!(joined.coordinates[1], want_lat);
        assert!(joined.coordinates[2].is_empty() && joined.indices[0].is_empty());
        assert_eq!(joined.indices[1], axis_indices(1, &grid, &flat));
        assert_eq!(joined.indices[2], axis_indices(2, &grid, &flat));
    }

    /// Bad pieces and bad coordinates are errors, and leave the columns as they were.
    #[test]
    fn bad_input_is_refused() {
        let none = || Columns { coordinates: vec![None], indices: vec![true], flat: true, aux: vec![] };
        assert!(Joined::new(vec![4], Columns { coordinates: vec![], ..none() }, vec![2]).is_err());
        let short = Columns { coordinates: vec![Some((vec![0; 12], 4))], ..none() };
        assert!(Joined::new(vec![4], short, vec![2]).is_err());
        let odd = Columns { coordinates: vec![Some((vec![0; 12], 3))], ..none() };
        assert!(Joined::new(vec![4], odd, vec![2]).is_err());
        let mut joined = Joined::new(vec![4], none(), vec![2]).unwrap();
        let outside = Points { flat: vec![1, 4], columns: vec![vec![0; 4]] };
        assert!(joined.add(std::slice::from_ref(&outside)).is_err());
        // A piece outside the grid fails its round after others in it may have been written:
        // none of the round is added.
        let inside = Points { flat: vec![0, 2], columns: vec![vec![7; 4]] };
        assert!(joined.add(&[inside, outside]).is_err());
        let columnless = Points { flat: vec![1], columns: vec![] };
        assert!(joined.add(&[columnless]).is_err());
        assert!(joined.flat.is_empty() && joined.indices[0].is_empty() && joined.values[0].is_empty());
    }
}
