package batchfile

import (
	"fmt"
	"strconv"
)

// DataStart is where a pipeline batch file's tensor data begins: the
// safetensors JSON header is padded with spaces so that the data is page
// aligned and np.memmap / mmap give aligned zero-copy tensors.
const DataStart = PageSize

// ChannelsLast is the pixel layout whose images are [B,S,S,3]; any other
// is [B,3,S,S].
const ChannelsLast = "nhwc"

// Layout is where each tensor of a B-sample batch of the built-in
// pipeline lies in its file. labels and indices come first so that they
// are 8-byte aligned whatever the image size; the images follow at
// DataStart+16·B.
type Layout struct {
	Samples     int
	SampleBytes int // one image's bytes
	Size        int // the whole file's
}

// NewLayout is the layout of samples images of S×S×3 bytes.
func NewLayout(samples, imageSize int) Layout {
	return LayoutFor(samples, 3*imageSize*imageSize)
}

// LayoutFor is the layout of samples images of sampleBytes each.
func LayoutFor(samples, sampleBytes int) Layout {
	return Layout{Samples: samples, SampleBytes: sampleBytes, Size: DataStart + 16*samples + sampleBytes*samples}
}

// LabelsAt is where the labels (I64) begin in the file.
func (l Layout) LabelsAt() int { return DataStart }

// IndicesAt is where the dataset indices (I64) begin.
func (l Layout) IndicesAt() int { return DataStart + 8*l.Samples }

// ImagesAt is where the images (U8) begin.
func (l Layout) ImagesAt() int { return DataStart + 16*l.Samples }

// Meta is what a pipeline batch's __metadata__ says.
type Meta struct {
	Epoch, Index int
	Seq          uint64
	ImageSize    int
	Layout       string // nchw or nhwc (ChannelsLast)
	Transform    string
}

// Header is the batch's parsed form and its encoding: the 8-byte length
// and the JSON padded to DataStart.
func (l Layout) Header(m Meta) (*Header, []byte, error) {
	S, B := int64(m.ImageSize), int64(l.Samples)
	shape := []int64{B, 3, S, S}
	if m.Layout == ChannelsLast {
		shape = []int64{B, S, S, 3}
	}
	rel := func(at int) int64 { return int64(at - DataStart) }
	h := &Header{
		Meta: map[string]string{
			"format": "tsock", "epoch": strconv.Itoa(m.Epoch), "batch": strconv.Itoa(m.Index),
			"seq": strconv.FormatUint(m.Seq, 10), "samples": strconv.Itoa(l.Samples),
			"image_size": strconv.Itoa(m.ImageSize), "layout": m.Layout, "transform": m.Transform,
		},
		Tensors: []Tensor{
			{Name: "labels", Dtype: "I64", Shape: []int64{B}, Begin: rel(l.LabelsAt()), End: rel(l.IndicesAt())},
			{Name: "indices", Dtype: "I64", Shape: []int64{B}, Begin: rel(l.IndicesAt()), End: rel(l.ImagesAt())},
			{Name: "images", Dtype: "U8", Shape: shape, Begin: rel(l.ImagesAt()), End: rel(l.Size)},
		},
		Samples: l.Samples,
	}
	enc := h.Encode(PageSize)
	if h.DataStart != DataStart {
		return nil, nil, fmt.Errorf("batch header of %d bytes does not fit in %d", len(enc), DataStart)
	}
	return h, enc, nil
}
