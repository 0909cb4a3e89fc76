package pipeline

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
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
