// Package turbo decodes JPEGs with libjpeg-turbo's libjpeg API, loaded at
// run time with dlopen("libjpeg.so.62") so that a binary without it still
// runs (the producer then falls back to Go's decoder and says so).
//
// It decodes only a region: the rows of a random crop (rows above are
// skipped, rows below never read) and its iMCU columns, at a DCT-domain
// scale of num/8, so most of a photo is never inverse-transformed.
// Every colour space comes out as RGB: grayscale and YCbCr by libjpeg,
// CMYK and YCCK (Adobe-inverted, as Photoshop and PIL write them) here,
// with Pillow's own conversion, byte for byte.
//
// Invariant: a partial decode reads less of the file than a full one, so
// damage outside the region goes unseen. Callers decode each file once
// with verify (everything is read, every warning is an error) before they
// trust partial decodes of it: then a file that fails, fails every time.
//
// What crosses its border: in, a JPEG's bytes, a Region and a scale; out,
// RGB pixels of the region, or an error (the producer counts the file
// skipped). Only package pipeline calls it.
package turbo
