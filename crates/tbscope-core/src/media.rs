//! What a media blob is, guessed from its bytes (the image table's content type).

/// Content types sniffed from image bytes, by code.
pub const IMAGE_TYPES: [&str; 6] = [
    "application/octet-stream",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/bmp",
    "image/webp",
];

/// Guesses an image's MIME type from its first bytes.
pub fn sniff_image(b: &[u8]) -> u8 {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        1
    } else if b.starts_with(b"\xff\xd8\xff") {
        2
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        3
    } else if b.starts_with(b"BM") {
        4
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        5
    } else {
        0
    }
}
