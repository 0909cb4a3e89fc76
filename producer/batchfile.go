package producer

import (
	"fmt"
	"strconv"

	"github.com/tsock/tsock/producer/batchfile"
)

// DataStart is where a batch file's tensor data begins: the safetensors
// JSON header is padded with spaces so that the data is page aligned and
// np.memmap / mmap give aligned zero-copy tensors.
const DataStart = batchfile.PageSize

// batchLayout is where each tensor of a B-sample batch lies in the file.
// labels and indices come first so that they are 8-byte aligned whatever
// the image size; the images follow at DataStart+16·B.
type batchLayout struct {
	samples     int
	sampleBytes int
	size        int
}

func newBatchLayout(samples, imageSize int) batchLayout {
	return layoutFor(samples, 3*imageSize*imageSize)
}

func layoutFor(samples, sampleBytes int) batchLayout {
	return batchLayout{samples: samples, sampleBytes: sampleBytes, size: DataStart + 16*samples + sampleBytes*samples}
}

func (l batchLayout) labelsAt() int  { return DataStart }
func (l batchLayout) indicesAt() int { return DataStart + 8*l.samples }
func (l batchLayout) imagesAt() int  { return DataStart + 16*l.samples }

// batchMeta is what a batch's __metadata__ says.
type batchMeta struct {
	epoch, index int
	seq          uint64
	imageSize    int
	layout       Layout
	transform    Transform
}

// header is the batch's parsed form and its encoding: the 8-byte length
// and the JSON padded to DataStart.
func (l batchLayout) header(m batchMeta) (*batchfile.Header, []byte, error) {
	S, B := int64(m.imageSize), int64(l.samples)
	shape := []int64{B, 3, S, S}
	if m.layout == NHWC {
		shape = []int64{B, S, S, 3}
	}
	rel := func(at int) int64 { return int64(at - DataStart) }
	h := &batchfile.Header{
		Meta: map[string]string{
			"format": "tsock", "epoch": strconv.Itoa(m.epoch), "batch": strconv.Itoa(m.index),
			"seq": strconv.FormatUint(m.seq, 10), "samples": strconv.Itoa(l.samples),
			"image_size": strconv.Itoa(m.imageSize), "layout": string(m.layout), "transform": string(m.transform),
		},
		Tensors: []batchfile.Tensor{
			{Name: "labels", Dtype: "I64", Shape: []int64{B}, Begin: rel(l.labelsAt()), End: rel(l.indicesAt())},
			{Name: "indices", Dtype: "I64", Shape: []int64{B}, Begin: rel(l.indicesAt()), End: rel(l.imagesAt())},
			{Name: "images", Dtype: "U8", Shape: shape, Begin: rel(l.imagesAt()), End: rel(l.size)},
		},
		Samples: l.samples,
	}
	enc := h.Encode(batchfile.PageSize)
	if h.DataStart != DataStart {
		return nil, nil, fmt.Errorf("batch header of %d bytes does not fit in %d", len(enc), DataStart)
	}
	return h, enc, nil
}
