//! The byte-level alphabet: the printable character GPT-2's `bytes_to_unicode`
//! writes for each byte, which byte-level vocabularies spell their tokens in.

/// The 256 byte-level characters: byte b is written as `alphabet()[b]` (GPT-2's bytes_to_unicode).
pub fn alphabet() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut out = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        out[b as usize] = if printable(b) {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("256..=323 are valid chars")
        };
    }
    out
}
