// Package pipeline turns one sample's encoded bytes into its S×S pixels:
// decode (libjpeg-turbo through package turbo, or Go's decoders for every
// other format and as a fallback), crop (torchvision's RandomResizedCrop
// and flip, or the eval Resize + CenterCrop), antialiased resize (the C
// passes in resample.c) and layout (NCHW or NHWC).
//
// What crosses its border: in, bytes and the sample's (epoch, index);
// out, 3·S·S bytes in the caller's buffer. It knows no source, no batch
// and no store: a Maker is one worker's state, used by one goroutine.
//
// Invariants:
//   - A sample's crop and flip depend only on (seed, epoch, index): the
//     same bytes whatever the worker or the order of making.
//   - A JPEG is verified whole the first time it is decoded (epoch 0);
//     later decodes read only the crop's region, at the smallest 1/8 DCT
//     scale that keeps S pixels a side.
//   - Any byte sequence decodes or fails with an error naming why: no
//     panic, no image over MaxPixels or maxDecodeBytes is allocated.
//   - A worker gives back buffers a rare huge image grew (keepBytes).
package pipeline
