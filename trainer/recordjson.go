package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Non-finite numbers in the metrics files and the page's data.json.
//
// JSON has no NaN or infinity, and encoding/json refuses them ("json:
// unsupported value: NaN"), which once stopped a run at the moment its
// loss went NaN (issue 43). Records write them as the strings "NaN",
// "Infinity" and "-Infinity", JavaScript's own spellings: the live page
// reads them back with Number(), Python with float(), pandas with
// read_json or read_csv, Go with strconv.ParseFloat, and ReadJSONLines
// turns them back into numbers. A string, rather than null, keeps which
// of the three it was. CSV writes the same words.
const (
	nanText    = "NaN"
	posInfText = "Infinity"
	negInfText = "-Infinity"
)

// formatMetric is v as the metrics files write it: the shortest decimal
// that reads back as v, or one of the words above.
func formatMetric(v float64) string {
	switch {
	case math.IsNaN(v):
		return nanText
	case math.IsInf(v, 1):
		return posInfText
	case math.IsInf(v, -1):
		return negInfText
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// jsonFloat is a float64 that JSON holds whatever its value.
type jsonFloat float64

// MarshalJSON writes a finite value as encoding/json does, and NaN and
// ±Inf as strings.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte(`"` + formatMetric(v) + `"`), nil
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads a number or one of the three words.
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case nanText:
			*f = jsonFloat(math.NaN())
		case posInfText:
			*f = jsonFloat(math.Inf(1))
		case negInfText:
			*f = jsonFloat(math.Inf(-1))
		default:
			return fmt.Errorf("trainer: metrics value %q: want a number, %q, %q or %q", s, nanText, posInfText, negInfText)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = jsonFloat(v)
	return nil
}

// recordJSON is Record as JSON holds it: the same fields and names
// (TestRecordJSONFields keeps them so), its numbers as jsonFloat.
type recordJSON struct {
	Kind               string               `json:"kind"`
	Step               int                  `json:"step"`
	Epoch              int                  `json:"epoch"`
	Loss               jsonFloat            `json:"loss"`
	LR                 jsonFloat            `json:"lr"`
	SamplesPerS        jsonFloat            `json:"samples_per_s"`
	AllReduceHiddenPct jsonFloat            `json:"allreduce_hidden_pct"`
	ElapsedS           jsonFloat            `json:"elapsed_s"`
	GradNorm           jsonFloat            `json:"grad_norm,omitempty"`
	TokensPerS         jsonFloat            `json:"tokens_per_s,omitempty"`
	MFU                jsonFloat            `json:"mfu,omitempty"`
	Eval               map[string]jsonFloat `json:"eval,omitempty"`
	Ranks              []RankComm           `json:"ranks,omitempty"`
}

// MarshalJSON writes NaN and ±Inf as "NaN", "Infinity" and "-Infinity".
func (r Record) MarshalJSON() ([]byte, error) {
	j := recordJSON{Kind: r.Kind, Step: r.Step, Epoch: r.Epoch, Loss: jsonFloat(r.Loss), LR: jsonFloat(r.LR),
		SamplesPerS: jsonFloat(r.SamplesPerS), AllReduceHiddenPct: jsonFloat(r.AllReduceHiddenPct),
		ElapsedS: jsonFloat(r.ElapsedS), Ranks: r.Ranks,
		GradNorm: jsonFloat(r.GradNorm), TokensPerS: jsonFloat(r.TokensPerS), MFU: jsonFloat(r.MFU)}
	if r.Eval != nil {
		j.Eval = make(map[string]jsonFloat, len(r.Eval))
		for k, v := range r.Eval {
			j.Eval[k] = jsonFloat(v)
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Record{Kind: j.Kind, Step: j.Step, Epoch: j.Epoch, Loss: float64(j.Loss), LR: float64(j.LR),
		SamplesPerS: float64(j.SamplesPerS), AllReduceHiddenPct: float64(j.AllReduceHiddenPct),
		ElapsedS: float64(j.ElapsedS), Ranks: j.Ranks,
		GradNorm: float64(j.GradNorm), TokensPerS: float64(j.TokensPerS), MFU: float64(j.MFU)}
	if j.Eval != nil {
		r.Eval = make(map[string]float64, len(j.Eval))
		for k, v := range j.Eval {
			r.Eval[k] = float64(v)
		}
	}
	return nil
}

// rankCommJSON is RankComm as JSON holds it.
type rankCommJSON struct {
	Rank      int       `json:"rank"`
	HiddenPct jsonFloat `json:"hidden_pct"`
	WaitMs    jsonFloat `json:"wait_ms"`
	CommMs    jsonFloat `json:"comm_ms"`
}

// MarshalJSON writes NaN and ±Inf as Record's MarshalJSON does.
func (c RankComm) MarshalJSON() ([]byte, error) {
	return json.Marshal(rankCommJSON{Rank: c.Rank, HiddenPct: jsonFloat(c.HiddenPct), WaitMs: jsonFloat(c.WaitMs), CommMs: jsonFloat(c.CommMs)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (c *RankComm) UnmarshalJSON(b []byte) error {
	var j rankCommJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = RankComm{Rank: j.Rank, HiddenPct: float64(j.HiddenPct), WaitMs: float64(j.WaitMs), CommMs: float64(j.CommMs)}
	return nil
}
