//! Geohash arithmetic of Redis 7.0's geo commands (`geohash.c`, `geohash_helper.c`).
//!
//! Geo sets are sorted sets whose scores are 52-bit interleaved geohashes (26 bits of latitude
//! in the even positions, 26 of longitude in the odd ones, over Redis's Web Mercator limits).
//! Replies must match Redis byte for byte, so every floating-point expression here is evaluated
//! in the same order as Redis's C (same operations, same libm calls): scores, distances and the
//! neighbour boxes a radius or box search visits come out identical.

/// Bits of precision per coordinate of a stored score (26 * 2 = 52 bits).
pub const STEP_MAX: u8 = 26;
/// Redis cannot index the poles (EPSG:900913 limits).
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

/// Earth's quadratic mean radius for WGS-84, as Redis uses it for every distance.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians: C's `M_PI / 180.0`.
const D_R: f64 = std::f64::consts::PI / 180.0;

#[inline]
fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

#[inline]
fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash of `step` bits per coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    /// Redis's "zero" hash (a neighbour box excluded from a search).
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    #[inline]
    fn is_zero(&self) -> bool {
        self.max == 0.0 && self.min == 0.0
    }
}

/// The rectangle a hash covers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// Longitude and latitude ranges of stored scores.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// Interleaves the low 32 bits of `x` (even positions) and `y` (odd positions).
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = xlo as u64;
    let mut y = ylo as u64;
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// Undoes [`interleave64`]: even bits in the low half, odd bits in the high half.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// `geohashEncode`: the `step`-bit hash of a point within the given ranges; None where Redis
/// refuses (bad step, point outside the Mercator limits or the ranges).
pub fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<HashBits> {
    if step > 32 || step == 0 || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    // (Callers never pass a NaN: arguments are parsed without it, decoded points are finite.)
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    // C converts the (non-negative, at most 2^32) offsets to uint32_t by truncation.
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// `geohashEncodeWGS84`: [`encode`] over the stored-score ranges.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step)
}

/// `geohashDecode`: the area a hash covers (None for the zero hash).
pub fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    let step = hash.step;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    // `1ull << step` as a double (a step above 63 never comes here: scores decode at 26).
    let div = (1u64 << (step & 63)) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (ilato as f64 * 1.0 / div) * lat_scale,
            max: lat_range.min + (ilato.wrapping_add(1) as f64 * 1.0 / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 * 1.0 / div) * long_scale,
            max: long_range.min + (ilono.wrapping_add(1) as f64 * 1.0 / div) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: the centre of an area, clamped to the Mercator limits.
fn area_center(area: &Area) -> (f64, f64) {
    let x = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let y = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (x, y)
}

/// C's `(uint64_t)score` on x86-64 as GCC compiles it: values below 2^63 (negative ones
/// included) through a signed conversion, larger ones offset by 2^63; out-of-range and NaN
/// inputs give what the hardware gives. Any zset score can reach the decoder (a ZADD by hand).
pub fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    /// `cvttsd2si`: truncation, or the "integer indefinite" value when it does not fit.
    fn cvtt(x: f64) -> u64 {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            0x8000_0000_0000_0000
        } else {
            (x as i64) as u64
        }
    }
    // (A NaN compares unordered: the first branch, as `comisd` + `jnb` does.)
    if score.is_nan() || score < TWO_63 {
        cvtt(score)
    } else {
        cvtt(score - TWO_63) ^ 0x8000_0000_0000_0000
    }
}

/// Longitude and latitude of a stored score (Redis `decodeGeohash`; never fails at step 26).
pub fn decode_score(score: f64) -> (f64, f64) {
    let hash = HashBits {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    match decode(LONG_RANGE, LAT_RANGE, hash) {
        Some(area) => area_center(&area),
        // Unreachable: the step is never zero.
        None => (0.0, 0.0),
    }
}

/// `geohashAlign52Bits`: a hash shifted to a 52-bit score.
#[inline]
pub fn align52(hash: HashBits) -> u64 {
    // (Steps are 1..=26 here; anything else would be a bug, not worth a panic.)
    52u32
        .checked_sub(hash.step as u32 * 2)
        .map_or(0, |shift| hash.bits << shift)
}

/// The score GEOADD stores for a point (already validated against the limits).
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode_wgs84(longitude, latitude, STEP_MAX).map(align52)
}

/// The standard 11-character geohash of a stored score (GEOHASH): decoded, then re-encoded
/// over the usual ±90 latitude range, the 11th character always '0'.
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (x, y) = decode_score(score);
    let bits = encode(
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
        x,
        y,
        26,
    )
    .map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

fn move_x(hash: &mut HashBits, d: i8) {
    move_axis(hash, d, 0xaaaa_aaaa_aaaa_aaaa, 0x5555_5555_5555_5555);
}

fn move_y(hash: &mut HashBits, d: i8) {
    move_axis(hash, d, 0x5555_5555_5555_5555, 0xaaaa_aaaa_aaaa_aaaa);
}

/// Redis's `geohash_move_x`/`_y`: steps the interleaved coordinate whose bits are `own` by one
/// cell (`d` > 0 forward, < 0 back), carrying through the `other` coordinate's bit positions.
fn move_axis(hash: &mut HashBits, d: i8, own: u64, other: u64) {
    // (A zero-step hash has no neighbours; the shifts below need a step of 1..=32.)
    if d == 0 || hash.step == 0 || hash.step > 32 {
        return;
    }
    let shift = 64 - hash.step as u32 * 2;
    let mut v = hash.bits & own;
    let keep = hash.bits & other;
    let zz = other >> shift;
    if d > 0 {
        v = v.wrapping_add(zz + 1);
    } else {
        v |= zz;
        v = v.wrapping_sub(zz + 1);
    }
    v &= own >> shift;
    hash.bits = v | keep;
}

/// The eight boxes around a hash.
#[derive(Clone, Copy, Debug, Default)]
pub struct Neighbors {
    pub north: HashBits,
    pub east: HashBits,
    pub west: HashBits,
    pub south: HashBits,
    pub north_east: HashBits,
    pub south_east: HashBits,
    pub north_west: HashBits,
    pub south_west: HashBits,
}

fn neighbors_of(hash: HashBits) -> Neighbors {
    let at = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

/// A search area: a circle of `radius` or a `width` x `height` box (in the unit that
/// `conversion` turns into meters) around `(lon, lat)`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub lon: f64,
    pub lat: f64,
    pub conversion: f64,
    pub kind: ShapeKind,
}

#[derive(Clone, Copy, Debug)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// `geohashEstimateStepsByRadius`: the hash precision of the nine boxes of a search.
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    // Wider boxes towards the poles.
    #[allow(clippy::manual_range_contains)]
    if lat > 66.0 || lat < -66.0 {
        step -= 1;
        if lat > 80.0 || lat < -80.0 {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// `geohashBoundingBox`: [min lon, min lat, max lon, max lat] of a shape.
pub fn bounding_box(shape: &Shape) -> [f64; 4] {
    let (longitude, latitude) = (shape.lon, shape.lat);
    let (height, width) = match shape.kind {
        ShapeKind::Radius(r) => (shape.conversion * r, shape.conversion * r),
        ShapeKind::Box { width, height } => (
            shape.conversion * (height / 2.0),
            shape.conversion * (width / 2.0),
        ),
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    [
        if southern {
            longitude - long_delta_bottom
        } else {
            longitude - long_delta_top
        },
        latitude - lat_delta,
        if southern {
            longitude + long_delta_bottom
        } else {
            longitude + long_delta_top
        },
        latitude + lat_delta,
    ]
}

/// The boxes a search visits, in Redis's order: the centre box, then north, south, east, west,
/// north-east, north-west, south-east, south-west (zero hashes: boxes left out).
pub fn search_boxes(shape: &Shape) -> [HashBits; 9] {
    let b = bounding_box(shape);
    let (min_lon, min_lat, max_lon, max_lat) = (b[0], b[1], b[2], b[3]);
    let radius_meters = match shape.kind {
        ShapeKind::Radius(r) => r,
        ShapeKind::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, shape.lat);
    let at = |steps: u8| {
        let hash = encode(LONG_RANGE, LAT_RANGE, shape.lon, shape.lat, steps).unwrap_or_default();
        let area = decode(LONG_RANGE, LAT_RANGE, hash).unwrap_or_default();
        (hash, neighbors_of(hash), area)
    };
    let (mut hash, mut n, mut area) = at(steps);
    // Near the edges of the covered area the estimated step may be too coarse for a neighbour
    // to reach the whole bounding box: one step less then.
    let dec = |h: HashBits| decode(LONG_RANGE, LAT_RANGE, h).unwrap_or_default();
    let decrease = dec(n.north).latitude.max < max_lat
        || dec(n.south).latitude.min > min_lat
        || dec(n.east).longitude.max < max_lon
        || dec(n.west).longitude.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (hash, n, area) = at(steps);
    }
    // Leave out the boxes the search area cannot reach.
    if steps >= 2 {
        let zero = HashBits::default();
        if area.latitude.min < min_lat {
            n.south = zero;
            n.south_west = zero;
            n.south_east = zero;
        }
        if area.latitude.max > max_lat {
            n.north = zero;
            n.north_east = zero;
            n.north_west = zero;
        }
        if area.longitude.min < min_lon {
            n.west = zero;
            n.south_west = zero;
            n.north_west = zero;
        }
        if area.longitude.max > max_lon {
            n.east = zero;
            n.south_east = zero;
            n.north_east = zero;
        }
    }
    [
        hash,
        n.north,
        n.south,
        n.east,
        n.west,
        n.north_east,
        n.north_west,
        n.south_east,
        n.south_west,
    ]
}

/// Scores `[min, max)` of the members inside a box.
pub fn box_scores(hash: HashBits) -> (u64, u64) {
    let min = align52(hash);
    let next = HashBits {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    };
    (min, align52(next))
}

/// `geohashGetLatDistance`: distance along a meridian.
pub fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// `geohashGetDistance`: haversine distance in meters.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// `geoWithinShape`: the decoded point of `score` and its distance from the shape's centre,
/// if it lies inside the shape.
pub fn within(shape: &Shape, score: f64) -> Option<(f64, f64, f64)> {
    let (x, y) = decode_score(score);
    match shape.kind {
        ShapeKind::Radius(r) => {
            let d = distance(shape.lon, shape.lat, x, y);
            (d <= r * shape.conversion).then_some((x, y, d))
        }
        ShapeKind::Box { width, height } => {
            let (width_m, height_m) = (width * shape.conversion, height * shape.conversion);
            if lat_distance(y, shape.lat) > height_m / 2.0 {
                return None;
            }
            if distance(x, y, shape.lon, y) > width_m / 2.0 {
                return None;
            }
            Some((x, y, distance(shape.lon, shape.lat, x, y)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trip() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            let i = interleave64(x, y);
            let d = deinterleave64(i);
            assert_eq!((d as u32, (d >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn scores_as_redis() {
        // `GEOADD nyc ...` then `ZRANGE nyc 0 -1 WITHSCORES` on redis-server 7.0.
        assert_eq!(score_of(-74.0131604, 40.7126674), Some(1791873972053020));
        assert_eq!(score_of(-73.9454966, 40.747533), Some(1791875804419201));
        assert_eq!(score_of(-73.7858139, 40.6428986), Some(1791895905559723));
        assert_eq!(
            &geohash_string(score_of(-5.6, 42.6).unwrap() as f64),
            b"ezs42e44yx0"
        );
    }

    #[test]
    fn odd_scores_decode_without_panicking() {
        for s in [
            -1.0,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e19,
            2e19,
            0.5,
        ] {
            let (x, y) = decode_score(s);
            assert!((LONG_MIN..=LONG_MAX).contains(&x) && (LAT_MIN..=LAT_MAX).contains(&y));
            let _ = geohash_string(s);
        }
        assert_eq!(score_bits(-1.0), u64::MAX);
        assert_eq!(score_bits(f64::INFINITY), 0);
        assert_eq!(score_bits(1e19), 10_000_000_000_000_000_000);
    }

    #[test]
    fn steps() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(1e-300, 0.0), 26);
    }
}
