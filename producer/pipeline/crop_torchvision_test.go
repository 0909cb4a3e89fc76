package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"testing"
)

// scripted replays recorded draws: each a fraction u in [0, 1), IntN(n)
// being int(u·n), as the Python side turns the same u into torch.randint's.
type scripted struct {
	floats, ints []float64
}

func (s *scripted) Float64() float64 {
	u := s.floats[0]
	s.floats = s.floats[1:]
	return u
}

func (s *scripted) IntN(n int) int {
	u := s.ints[0]
	s.ints = s.ints[1:]
	return int(u * float64(n))
}

// torchvisionCrops runs torchvision's RandomResizedCrop.get_params on
// each case, with torch's random calls replaced by the case's draws.
const torchvisionCrops = `
import json, math, sys
import torch
from PIL import Image
from torchvision import transforms
real_empty, real_exp, real_randint = torch.empty, torch.exp, torch.randint
out = []
for c in json.load(sys.stdin):
    floats, ints = iter(c["floats"]), iter(c["ints"])
    class Draw:
        def uniform_(self, a, b):
            self.v = float(a) + next(floats) * (float(b) - float(a))
            return self
        def item(self):
            return self.v
    class Value:
        def __init__(self, v): self.v = v
        def item(self): return self.v
    img = Image.new("L", (c["w"], c["h"]))
    torch.empty = lambda *a, **k: Draw()
    torch.exp = lambda t: Value(math.exp(t.v)) if isinstance(t, Draw) else real_exp(t)
    torch.randint = lambda low, high, size: Value(low + int(next(ints) * (high - low)))
    try:
        i, j, h, w = transforms.RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
    finally:
        torch.empty, torch.exp, torch.randint = real_empty, real_exp, real_randint
    out.append({"X": j, "Y": i, "W": w, "H": h})
print(json.dumps(out))
`

// TestTrainCropIsTorchvisions: given the same draws, the train crop's box
// is the one torchvision's RandomResizedCrop.get_params picks (its ten
// tries, its rounding, top drawn before left, its fallback), over images
// of every shape, the extreme ratios of the fallback included.
func TestTrainCropIsTorchvisions(t *testing.T) {
	type testCase struct {
		W      int       `json:"w"`
		H      int       `json:"h"`
		Floats []float64 `json:"floats"`
		Ints   []float64 `json:"ints"`
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var cases []testCase
	for i := range 400 {
		c := testCase{W: 1 + rng.IntN(1500), H: 1 + rng.IntN(1500)}
		if i%10 == 0 { // far outside 3:4..4:3: most tries fail, some fall back
			c.H = 1 + rng.IntN(8)
		}
		for range 20 {
			c.Floats = append(c.Floats, rng.Float64())
		}
		for range 2 {
			c.Ints = append(c.Ints, rng.Float64())
		}
		cases = append(cases, c)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", torchvisionCrops)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torchvision's get_params (python3-torchvision, from scripts/setup.sh with TSOCK_SETUP_TORCH=1): %v", err)
	}
	var want []Crop
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fallbacks := 0
	for i, c := range cases {
		got := randomResizedCrop(&scripted{floats: c.Floats, ints: c.Ints}, c.W, c.H)
		if got != want[i] {
			t.Errorf("%dx%d, draws %v %v: crop %+v, torchvision %+v", c.W, c.H, c.Floats, c.Ints, got, want[i])
		}
		if got.W == c.W || got.H == c.H {
			fallbacks++
		}
	}
	if fallbacks == 0 {
		t.Error("no case reached the fallback")
	}
}

// torchvisionDraws draws n train augmentations of a w×h image as a
// torchvision training transform does (RandomResizedCrop(224) then
// RandomHorizontalFlip(), torch's own generator): each crop's width,
// height, left edge, and whether it flips.
const torchvisionDraws = `
import json, sys
import torch
from PIL import Image
from torchvision import transforms
n, w, h = (int(a) for a in sys.argv[1:4])
torch.manual_seed(20261128)
img = Image.new("L", (w, h))
out = []
for _ in range(n):
    i, j, ch, cw = transforms.RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
    flip = bool(torch.rand(1) < 0.5)  # RandomHorizontalFlip(p=0.5)
    out.append([cw, ch, j, flip])
print(json.dumps(out))
`

// TestTrainAugmentationsAreDrawnAsTorchvisionDraws: exact crops for
// the same draws (above) are not enough: tsock's own draws (a stream per
// sample and epoch) must give the distributions torchvision's give. Over
// 10,000 draws each, on a landscape and a portrait photo's shape, a
// two-sample Kolmogorov-Smirnov test of the crop's scale (its share of
// the area), its aspect ratio (log) and its left edge (a share of the
// room), and a two-proportion test of the flip, each at a 0.1% level:
// a crop drawn another way (the ratio uniform instead of log-uniform, say)
// fails it.
func TestTrainAugmentationsAreDrawnAsTorchvisionDraws(t *testing.T) {
	const n = 10000
	for _, shape := range [][2]int{{500, 375}, {375, 500}} {
		w, h := shape[0], shape[1]
		out, err := exec.Command("/usr/bin/python3", "-c", torchvisionDraws, fmt.Sprint(n), fmt.Sprint(w), fmt.Sprint(h)).Output()
		if err != nil {
			t.Fatalf("torchvision's draws (python3-torchvision, from scripts/setup.sh with TSOCK_SETUP_TORCH=1): %v", err)
		}
		var theirs [][4]any
		if err := json.Unmarshal(out, &theirs); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		type draw struct {
			scale, logRatio, left float64
			flip                  bool
		}
		of := func(cw, ch, x int, flip bool) draw {
			left := 0.5 // no room to move: the centre
			if cw < w {
				left = float64(x) / float64(w-cw)
			}
			return draw{float64(cw*ch) / float64(w*h), math.Log(float64(cw) / float64(ch)), left, flip}
		}
		var ours, want []draw
		for i := range n {
			c := cropFor(Train, 7, 3, i, w, h, 224)
			ours = append(ours, of(c.W, c.H, c.X, c.Flip))
			d := theirs[i]
			want = append(want, of(int(d[0].(float64)), int(d[1].(float64)), int(d[2].(float64)), d[3].(bool)))
		}
		for _, m := range []struct {
			name string
			get  func(draw) float64
		}{{"scale", func(d draw) float64 { return d.scale }}, {"log aspect ratio", func(d draw) float64 { return d.logRatio }},
			{"left edge", func(d draw) float64 { return d.left }}} {
			a, b := make([]float64, n), make([]float64, n)
			for i := range n {
				a[i], b[i] = m.get(ours[i]), m.get(want[i])
			}
			// Critical value at 0.1%: c(α)·sqrt((n+m)/(n·m)), c = 1.949.
			if d, crit := ksDistance(a, b), 1.949*math.Sqrt(2.0/n); d > crit {
				t.Errorf("%dx%d: the %s's distribution differs from torchvision's: KS distance %.4f over the 0.1%% critical %.4f", w, h, m.name, d, crit)
			}
		}
		flips := func(ds []draw) (k float64) {
			for _, d := range ds {
				if d.flip {
					k++
				}
			}
			return k / n
		}
		p1, p2 := flips(ours), flips(want)
		pooled := (p1 + p2) / 2
		if z := math.Abs(p1-p2) / math.Sqrt(pooled*(1-pooled)*2/n); z > 3.29 { // 0.1%, two-sided
			t.Errorf("%dx%d: flips %.3f against torchvision's %.3f (z %.2f)", w, h, p1, p2, z)
		}
	}
}

// ksDistance is the two-sample Kolmogorov-Smirnov statistic: the largest
// gap between the two samples' empirical distribution functions.
func ksDistance(a, b []float64) float64 {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	var d float64
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x := min(a[i], b[j])
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}
