package ops

import (
	"fmt"
	"math"
	"sort"

	"github.com/kiln-ml/kiln/ir"
)

// Detection ops: NonMaxSuppression (greedy box selection; its output's
// length is known only at run time) and RoiAlign (bilinear pooling of
// regions of interest). RoiAlign-16 adds coordinate_transformation_mode
// (default half_pixel); 10 behaves as output_half_pixel.

var roiAlignAttrs = []AttrDef{defString("mode", "avg"), defInt("output_height", 1), defInt("output_width", 1),
	defInt("sampling_ratio", 0), defFloat("spatial_scale", 1)}

var detectionOps = []*Schema{
	{Name: "NonMaxSuppression", Since: 10, MinInputs: 2, MaxInputs: 5, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("center_point_box", 0)}, Types: []ir.DType{ir.Float32}, Infer: inferNonMaxSuppression, Run: runNonMaxSuppression},
	{Name: "NonMaxSuppression", Since: 11, MinInputs: 2, MaxInputs: 5, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("center_point_box", 0)}, Types: []ir.DType{ir.Float32}, Infer: inferNonMaxSuppression, Run: runNonMaxSuppression},
	{Name: "RoiAlign", Since: 10, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: roiAlignAttrs, Types: floatTypes, Infer: inferRoiAlign, Run: runRoiAlign},
	{Name: "RoiAlign", Since: 16, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: append([]AttrDef{defString("coordinate_transformation_mode", "half_pixel")}, roiAlignAttrs...),
		Types: floatTypes, Infer: inferRoiAlign, Run: runRoiAlign},
	{Name: "RoiAlign", Since: 22, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: append([]AttrDef{defString("coordinate_transformation_mode", "half_pixel")}, roiAlignAttrs...),
		Types: floatTypes, Infer: inferRoiAlign, Run: runRoiAlign},
}

func init() { register(detectionOps) }

// --- NonMaxSuppression -----------------------------------------------------------

func inferNonMaxSuppression(c *InferContext) error {
	boxes, scores := c.In(0), c.In(1)
	if boxes.Shape.Ranked && boxes.Shape.Rank() != 3 {
		return c.Errorf("boxes have rank %d, want 3 (batch, boxes, 4)", boxes.Shape.Rank())
	}
	if scores.Shape.Ranked && scores.Shape.Rank() != 3 {
		return c.Errorf("scores have rank %d, want 3 (batch, classes, boxes)", scores.Shape.Rank())
	}
	if boxes.Shape.Ranked {
		if d := boxes.Shape.Dims[2]; d.IsStatic() && d.Value != 4 {
			return c.Errorf("boxes' last axis has %d entries, want 4", d.Value)
		}
	}
	if e := c.Int("center_point_box"); e != 0 && e != 1 {
		return c.Errorf("center_point_box is %d, want 0 or 1", e)
	}
	// How many boxes survive depends on the data.
	c.Set(0, ir.TensorType(ir.Int64, ir.ShapeOf(dataDim(c, 0), ir.D(3))))
	return setConstShapes(c)
}

// setConstShapes gives an op whose output lengths depend on its data
// (NonMaxSuppression, Unique) its exact output types when every input it
// has is a constant, by running the reference kernel on them.
func setConstShapes(c *InferContext) error {
	ins := make([]*ir.Tensor, len(c.Node.Inputs))
	for i := range ins {
		if !c.HasInput(i) {
			continue
		}
		if ins[i] = c.Const(i); ins[i] == nil {
			return nil
		}
	}
	k := NewKernelContext(c.schema, c.Node, c.Opset, ins)
	if err := c.schema.Run(k); err != nil {
		return err
	}
	for i, t := range k.Outputs {
		if t != nil {
			c.Set(i, t.Type())
		}
	}
	return nil
}

// box is a box as its corners, ordered so that y1 <= y2 and x1 <= x2.
type box struct{ y1, x1, y2, x2 float64 }

func boxAt(v []float64, centre bool) box {
	if centre {
		xc, yc, w, h := v[0], v[1], v[2], v[3]
		return box{yc - h/2, xc - w/2, yc + h/2, xc + w/2}
	}
	return box{math.Min(v[0], v[2]), math.Min(v[1], v[3]), math.Max(v[0], v[2]), math.Max(v[1], v[3])}
}

func (b box) area() float64 { return (b.y2 - b.y1) * (b.x2 - b.x1) }

// iou is the intersection over union of two boxes; 0 when either is empty.
func iou(a, b box) float64 {
	if a.area() <= 0 || b.area() <= 0 {
		return 0
	}
	h := math.Min(a.y2, b.y2) - math.Max(a.y1, b.y1)
	w := math.Min(a.x2, b.x2) - math.Max(a.x1, b.x1)
	if h <= 0 || w <= 0 {
		return 0
	}
	inter := h * w
	return inter / (a.area() + b.area() - inter)
}

// nmsLimits are NonMaxSuppression's optional scalar inputs.
type nmsLimits struct {
	maxPerClass    int64
	iou, score     float64
	scoreThreshold bool
}

func nmsLimitsOf(c *KernelContext) (nmsLimits, error) {
	var l nmsLimits
	if t := c.In(2); t != nil && t.Len() > 0 {
		if t.DType != ir.Int64 || t.Len() != 1 {
			return l, fmt.Errorf("max_output_boxes_per_class must be one int64")
		}
		l.maxPerClass = t.Int64At(0)
	}
	if t := c.In(3); t != nil && t.Len() > 0 {
		if !t.DType.IsFloat() || t.Len() != 1 {
			return l, fmt.Errorf("iou_threshold must be one float")
		}
		l.iou = t.Float64At(0)
	}
	if t := c.In(4); t != nil && t.Len() > 0 {
		if !t.DType.IsFloat() || t.Len() != 1 {
			return l, fmt.Errorf("score_threshold must be one float")
		}
		l.score, l.scoreThreshold = t.Float64At(0), true
	}
	if l.iou < 0 || l.iou > 1 {
		return l, fmt.Errorf("iou_threshold %v is outside [0, 1]", l.iou)
	}
	return l, nil
}

func runNonMaxSuppression(c *KernelContext) error {
	bt, st := c.In(0), c.In(1)
	if err := checkType(c, bt.DType); err != nil {
		return err
	}
	if st.DType != bt.DType {
		return c.Errorf("boxes are %s and scores %s, want one type", bt.DType, st.DType)
	}
	if len(bt.Dims) != 3 || bt.Dims[2] != 4 || len(st.Dims) != 3 || st.Dims[0] != bt.Dims[0] || st.Dims[2] != bt.Dims[1] {
		return c.Errorf("boxes %v and scores %v: want (B, N, 4) and (B, C, N)", ir.FormatList(bt.Dims), ir.FormatList(st.Dims))
	}
	lim, err := nmsLimitsOf(c)
	if err != nil {
		return c.Errorf("%v", err)
	}
	centre := c.Int("center_point_box") != 0
	batches, classes, n := st.Dims[0], st.Dims[1], st.Dims[2]
	bv, sv := Float64s(bt), Float64s(st)
	var out []int64
	for b := int64(0); b < batches; b++ {
		boxes := make([]box, n)
		for i := range boxes {
			boxes[i] = boxAt(bv[(b*n+int64(i))*4:], centre)
		}
		for cl := int64(0); cl < classes; cl++ {
			scores := sv[(b*classes+cl)*n : (b*classes+cl+1)*n]
			for _, i := range selectBoxes(boxes, scores, lim) {
				out = append(out, b, cl, int64(i))
			}
		}
	}
	c.Set(0, FromInt64s(ir.Int64, []int64{int64(len(out) / 3), 3}, out))
	return nil
}

// selectBoxes is greedy NMS for one class: take the best remaining box
// (ties to the lower index), drop those overlapping it by more than the
// IoU threshold, repeat up to maxPerClass boxes.
func selectBoxes(boxes []box, scores []float64, lim nmsLimits) []int {
	var order []int
	for i, s := range scores {
		if !lim.scoreThreshold || s > lim.score {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
	var kept []int
	for _, i := range order {
		if int64(len(kept)) >= lim.maxPerClass {
			break
		}
		keep := true
		for _, j := range kept {
			if iou(boxes[i], boxes[j]) > lim.iou {
				keep = false
				break
			}
		}
		if keep {
			kept = append(kept, i)
		}
	}
	return kept
}

// --- RoiAlign -------------------------------------------------------------------

func roiAlignMode(a attrs) (maxMode, halfPixel bool, err error) {
	switch m := a.String("mode"); m {
	case "avg", "max":
		maxMode = m == "max"
	default:
		return false, false, fmt.Errorf("mode is %q, want avg or max", m)
	}
	if a.declares("coordinate_transformation_mode") {
		switch m := a.String("coordinate_transformation_mode"); m {
		case "half_pixel", "output_half_pixel":
			halfPixel = m == "half_pixel"
		default:
			return false, false, fmt.Errorf("coordinate_transformation_mode is %q, want half_pixel or output_half_pixel", m)
		}
	}
	if a.Int("output_height") < 1 || a.Int("output_width") < 1 || a.Int("sampling_ratio") < 0 {
		return false, false, fmt.Errorf("output_height and output_width must be positive, sampling_ratio non-negative")
	}
	return maxMode, halfPixel, nil
}

func inferRoiAlign(c *InferContext) error {
	if _, _, err := roiAlignMode(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	x, rois, ind := c.In(0), c.In(1), c.In(2)
	if x.Shape.Ranked && x.Shape.Rank() != 4 {
		return c.Errorf("input has rank %d, want 4 (N, C, H, W)", x.Shape.Rank())
	}
	if rois.Shape.Ranked && (rois.Shape.Rank() != 2 || rois.Shape.Dims[1].IsStatic() && rois.Shape.Dims[1].Value != 4) {
		return c.Errorf("rois have shape %s, want (num_rois, 4)", rois.Shape)
	}
	if ind.Shape.Ranked && ind.Shape.Rank() != 1 {
		return c.Errorf("batch_indices have rank %d, want 1", ind.Shape.Rank())
	}
	dims := []ir.Dim{ir.UnknownDim(), ir.UnknownDim(), ir.D(c.Int("output_height")), ir.D(c.Int("output_width"))}
	switch {
	case ind.Shape.Ranked:
		dims[0] = ind.Shape.Dims[0]
	case rois.Shape.Ranked:
		dims[0] = rois.Shape.Dims[0]
	}
	if x.Shape.Ranked {
		dims[1] = x.Shape.Dims[1]
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(dims...)))
	return nil
}

// roiSample is one bilinear sample: four pixel offsets and their weights.
type roiSample struct {
	pos [4]int64
	w   [4]float64
}

// bilinearSample is the sample at (y, x) of an h×w plane; points more than
// one pixel outside the plane weigh nothing.
func bilinearSample(y, x float64, h, w int64) roiSample {
	if y < -1 || y > float64(h) || x < -1 || x > float64(w) {
		return roiSample{}
	}
	y, x = math.Max(y, 0), math.Max(x, 0)
	yl, xl := int64(y), int64(x)
	yh, xh := yl+1, xl+1
	if yl >= h-1 {
		yl, yh, y = h-1, h-1, float64(h-1)
	}
	if xl >= w-1 {
		xl, xh, x = w-1, w-1, float64(w-1)
	}
	ly, lx := y-float64(yl), x-float64(xl)
	hy, hx := 1-ly, 1-lx
	return roiSample{pos: [4]int64{yl*w + xl, yl*w + xh, yh*w + xl, yh*w + xh}, w: [4]float64{hy * hx, hy * lx, ly * hx, ly * lx}}
}

func runRoiAlign(c *KernelContext) error {
	x, rt, it := c.In(0), c.In(1), c.In(2)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	maxMode, halfPixel, err := roiAlignMode(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if len(x.Dims) != 4 || len(rt.Dims) != 2 || rt.Dims[1] != 4 || len(it.Dims) != 1 || it.Dims[0] != rt.Dims[0] {
		return c.Errorf("input %v, rois %v and batch_indices %v: want (N, C, H, W), (R, 4) and (R)", ir.FormatList(x.Dims), ir.FormatList(rt.Dims), ir.FormatList(it.Dims))
	}
	batch, err := indexValues(it, "batch_indices")
	if err != nil {
		return c.Errorf("%v", err)
	}
	n, ch, h, w := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	if (h == 0 || w == 0) && ch*rt.Dims[0] > 0 {
		return c.Errorf("input of shape %v has no pixels to pool", ir.FormatList(x.Dims))
	}
	oh, ow := c.Int("output_height"), c.Int("output_width")
	ratio, scale := c.Int("sampling_ratio"), float64(c.Float("spatial_scale"))
	xs, rs := Float64s(x), Float64s(rt)
	nr := rt.Dims[0]
	out := make([]float64, nr*ch*oh*ow)
	offset := 0.0
	if halfPixel {
		offset = 0.5
	}
	for r := int64(0); r < nr; r++ {
		if batch[r] < 0 || batch[r] >= n {
			return c.Errorf("batch index %d of roi %d is outside [0, %d)", batch[r], r, n)
		}
		roi := rs[r*4:]
		x0, y0 := roi[0]*scale-offset, roi[1]*scale-offset
		rw, rh := roi[2]*scale-offset-x0, roi[3]*scale-offset-y0
		if !halfPixel {
			rw, rh = math.Max(rw, 1), math.Max(rh, 1)
		}
		bh, bw := rh/float64(oh), rw/float64(ow)
		gh, gw := ratio, ratio
		if ratio == 0 {
			gh, gw = int64(math.Ceil(bh)), int64(math.Ceil(bw))
		}
		count := float64(max(gh*gw, 1))
		for ph := int64(0); ph < oh; ph++ {
			for pw := int64(0); pw < ow; pw++ {
				var samples []roiSample
				for iy := int64(0); iy < gh; iy++ {
					sy := y0 + float64(ph)*bh + (float64(iy)+0.5)*bh/float64(gh)
					for ix := int64(0); ix < gw; ix++ {
						sx := x0 + float64(pw)*bw + (float64(ix)+0.5)*bw/float64(gw)
						samples = append(samples, bilinearSample(sy, sx, h, w))
					}
				}
				for cc := int64(0); cc < ch; cc++ {
					plane := xs[(batch[r]*ch+cc)*h*w:]
					out[((r*ch+cc)*oh+ph)*ow+pw] = poolSamples(plane, samples, maxMode, count)
				}
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, []int64{nr, ch, oh, ow}, out))
	return nil
}

// poolSamples averages the samples over count, or takes the largest
// weighted corner of any sample (ONNX's max mode, as its reference and
// ONNX Runtime compute it).
func poolSamples(plane []float64, samples []roiSample, maxMode bool, count float64) float64 {
	var acc float64
	for k, s := range samples {
		if maxMode {
			v := s.w[0] * plane[s.pos[0]]
			for i := 1; i < 4; i++ {
				v = math.Max(v, s.w[i]*plane[s.pos[i]])
			}
			if k == 0 || v > acc {
				acc = v
			}
			continue
		}
		for i := range 4 {
			acc += s.w[i] * plane[s.pos[i]]
		}
	}
	if maxMode {
		return acc
	}
	return acc / count
}
