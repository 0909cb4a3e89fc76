package producer

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// DataStart is where a batch file's tensor data begins: the safetensors
// JSON header is padded with spaces so that the data is page aligned and
// np.memmap / mmap give aligned zero-copy tensors.
const DataStart = 4096

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
	consumer     string // set in a consumer's re-batched file
}

// header renders the 8-byte length and the padded JSON header.
func (l batchLayout) header(m batchMeta) ([]byte, error) {
	S, B := m.imageSize, l.samples
	shape := fmt.Sprintf("[%d,3,%d,%d]", B, S, S)
	if m.layout == NHWC {
		shape = fmt.Sprintf("[%d,%d,%d,3]", B, S, S)
	}
	lab, idx, img := l.labelsAt()-DataStart, l.indicesAt()-DataStart, l.imagesAt()-DataStart
	who := ""
	if m.consumer != "" {
		who = fmt.Sprintf(`"consumer":%q,`, m.consumer)
	}
	js := fmt.Sprintf(`{"__metadata__":{%s"format":"tsock","epoch":"%d","batch":"%d","seq":"%d",`+
		`"samples":"%d","image_size":"%d","layout":"%s","transform":"%s"},`+
		`"labels":{"dtype":"I64","shape":[%d],"data_offsets":[%d,%d]},`+
		`"indices":{"dtype":"I64","shape":[%d],"data_offsets":[%d,%d]},`+
		`"images":{"dtype":"U8","shape":%s,"data_offsets":[%d,%d]}}`,
		who, m.epoch, m.index, m.seq, B, S, m.layout, m.transform,
		B, lab, idx, B, idx, img, shape, img, img+B*l.sampleBytes)
	n := DataStart - 8
	if len(js) > n {
		return nil, fmt.Errorf("batch header of %d bytes does not fit in %d", len(js), n)
	}
	out := make([]byte, DataStart)
	binary.LittleEndian.PutUint64(out, uint64(n))
	copy(out[8:], js+strings.Repeat(" ", n-len(js)))
	return out, nil
}
