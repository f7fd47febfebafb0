package text

import (
	"io"
	"strconv"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/kiln-ml/kiln/ir"
)

// Token kinds. The lexer is written by hand: participle's regexp lexer
// spent more time than the whole parse, and weights printed inline make
// texts of millions of tokens.
const (
	tokString lexer.TokenType = -(iota + 2) // lexer.EOF is -1
	tokFloat
	tokInt
	tokType
	tokIdent
	tokPunct
	tokData // a tensor literal, `{...}`, whole
)

// typeWords are the words that start a type. They lex as their own token
// kind so the optional type in front of a value name needs no backtracking;
// wherever a plain name is allowed the grammar accepts them too.
var typeWords = func() map[string]bool {
	words := map[string]bool{"seq": true, "map": true, "optional": true, "sparse_tensor": true, "opaque": true}
	for d := ir.DType(1); d.Valid(); d++ {
		words[d.String()] = true
	}
	return words
}()

// textLexer implements lexer.Definition for the syntax.
type textLexer struct{}

func (textLexer) Symbols() map[string]lexer.TokenType {
	return map[string]lexer.TokenType{
		"EOF": lexer.EOF, "String": tokString, "Float": tokFloat, "Int": tokInt,
		"Type": tokType, "Ident": tokIdent, "Punct": tokPunct, "Data": tokData,
	}
}

func (d textLexer) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return d.LexString(filename, string(src))
}

func (textLexer) LexString(filename, src string) (lexer.Lexer, error) {
	return newScanner(filename, src, ir.Limits{}), nil
}

func newScanner(filename, src string, lim ir.Limits) *scanner {
	return &scanner{src: src, pos: lexer.Position{Filename: filename, Line: 1, Column: 1}, lim: lim.OrDefaults()}
}

func (d textLexer) LexBytes(filename string, src []byte) (lexer.Lexer, error) {
	return d.LexString(filename, string(src))
}

type scanner struct {
	src  string
	i    int            // the next byte of src
	pos  lexer.Position // where src[i] is in the file
	prev string         // the last punctuation returned, or ""

	// Nesting: every recursive rule of the grammar opens a graph body
	// ('{' after a signature) or a type constructor ('seq(', 'map(', ...),
	// so counting those levels here, before the parser runs, bounds the
	// parser's and the resolver's recursion by lim.MaxNesting. open holds,
	// per open bracket, whether it is such a level.
	lim      ir.Limits
	open     []bool
	levels   int
	typeOpen bool // the last token was a type constructor word
}

// typeConstructors are the type words whose '(' opens a nested type.
var typeConstructors = map[string]bool{"seq": true, "map": true, "optional": true, "sparse_tensor": true, "opaque": true}

// nest tracks the brackets, refusing a graph or type level past the limit.
func (s *scanner) nest(punct string, pos lexer.Position) error {
	switch punct {
	case "(", "[", "<", "{":
		level := punct == "{" || punct == "(" && s.typeOpen
		s.open = append(s.open, level)
		if level {
			s.levels++
			if s.levels > s.lim.MaxNesting {
				return s.lim.NestingError(pos.String())
			}
		}
	case ")", "]", ">", "}":
		if n := len(s.open); n > 0 {
			if s.open[n-1] {
				s.levels--
			}
			s.open = s.open[:n-1]
		}
	}
	return nil
}

// advance moves past n bytes, keeping line and column (in runes) current.
func (s *scanner) advance(n int) {
	for _, c := range []byte(s.src[s.i : s.i+n]) {
		switch {
		case c == '\n':
			s.pos.Line++
			s.pos.Column = 1
		case c&0xc0 != 0x80: // not a UTF-8 continuation byte
			s.pos.Column++
		}
	}
	s.i += n
	s.pos.Offset += n
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWord(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// digits returns the index after the digits starting at i.
func (s *scanner) digits(i int) int {
	for i < len(s.src) && isDigit(s.src[i]) {
		i++
	}
	return i
}

func (s *scanner) Next() (lexer.Token, error) {
	src := s.src
	for s.i < len(src) { // whitespace and # comments
		c := src[s.i]
		if c == '#' {
			n := 0
			for s.i+n < len(src) && src[s.i+n] != '\n' {
				n++
			}
			s.advance(n)
			continue
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' {
			break
		}
		s.advance(1)
	}
	start, i := s.pos, s.i
	if i == len(src) {
		return lexer.EOFToken(start), nil
	}
	typ := tokPunct
	end := i + 1
	switch c := src[i]; {
	case c == '"':
		// A backslash makes the next byte literal, whatever it is, as in
		// ONNX's parser; any other byte (newlines included) stands for
		// itself.
		for end < len(src) && src[end] != '"' {
			if src[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(src) {
			return lexer.Token{}, &lexer.Error{Msg: "unterminated string", Pos: start}
		}
		typ, end = tokString, end+1
	case isDigit(c) || c == '-' && i+1 < len(src) && isDigit(src[i+1]):
		typ, end = tokInt, s.digits(i+1)
		if end < len(src) && src[end] == '.' {
			typ, end = tokFloat, s.digits(end+1)
		}
		if end < len(src) && (src[end] == 'e' || src[end] == 'E') {
			j := end + 1
			if j < len(src) && (src[j] == '+' || src[j] == '-') {
				j++
			}
			if k := s.digits(j); k > j {
				typ, end = tokFloat, k
			}
		}
	case isWord(c):
		for end < len(src) && isWord(src[end]) {
			end++
		}
		typ = tokIdent
		if typeWords[src[i:end]] {
			typ = tokType
		}
	case c == '{' && s.prev != ")" && s.prev != ">":
		// A brace after anything but a signature opens tensor data,
		// which goes to the resolver as one token: participle would
		// spend a struct and a loop iteration on each element.
		for ; end < len(src) && src[end] != '}'; end++ {
			switch src[end] {
			case '"':
				for end++; end < len(src) && src[end] != '"'; end++ {
					if src[end] == '\\' {
						end++
					}
				}
			case '#':
				for end < len(src) && src[end] != '\n' {
					end++
				}
			case '{', '<', '>', '(', ')', '[', ']', '=', ':', '@':
				s.advance(end - i)
				return lexer.Token{}, &lexer.Error{Msg: "expected '}' to close tensor data, found " + strconv.QuoteRune(rune(src[end])), Pos: s.pos}
			}
		}
		if end >= len(src) {
			return lexer.Token{}, &lexer.Error{Msg: "unterminated tensor data", Pos: start}
		}
		typ, end = tokData, end+1
	case c == '=' && i+1 < len(src) && src[i+1] == '>':
		end = i + 2
	case c == '[' || c == ']' || c == '(' || c == ')' || c == '{' || c == '}' || c == '<' || c == '>' ||
		c == ',' || c == ':' || c == '=' || c == '.' || c == '@' || c == '?' || c == '-':
	default:
		return lexer.Token{}, &lexer.Error{Msg: "unexpected character " + strconv.QuoteRune(rune(c)), Pos: start}
	}
	if typ == tokPunct {
		if err := s.nest(src[i:end], start); err != nil {
			return lexer.Token{}, err
		}
	}
	s.typeOpen = typ == tokType && typeConstructors[src[i:end]]
	s.advance(end - i)
	s.prev = ""
	if typ == tokPunct {
		s.prev = src[i:end]
	}
	return lexer.Token{Type: typ, Value: src[i:end], Pos: start}, nil
}
