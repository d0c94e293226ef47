// The code editor: CodeMirror 6 with the highlighting of the chosen
// language. Ctrl+Enter and Escape reach the page from inside it; Tab is
// left to move focus (no indentWithTab), so the page stays usable without
// a mouse.
import { EditorView, basicSetup } from 'codemirror';
import { keymap } from '@codemirror/view';
import { Compartment, Prec } from '@codemirror/state';
import { StreamLanguage } from '@codemirror/language';
import { python } from '@codemirror/lang-python';
import { javascript } from '@codemirror/lang-javascript';
import { shell } from '@codemirror/legacy-modes/mode/shell';

export const EXAMPLES = {
  python: 'import sys, time\n\nfor i in range(3):\n    print("line", i, flush=True)\n    time.sleep(0.5)\nprint("a note on stderr", file=sys.stderr)\n',
  javascript: 'let i = 0;\nconst timer = setInterval(() => {\n  console.log("line", i++);\n  if (i === 3) {\n    clearInterval(timer);\n    console.error("a note on stderr");\n  }\n}, 500);\n',
  typescript: 'type Point = { x: number; y: number };\n\nconst points: Point[] = [{ x: 1, y: 2 }, { x: 3, y: 4 }];\nconst total = (ps: Point[]): number => ps.reduce((sum, p) => sum + p.x * p.y, 0);\nconsole.log("total", total(points));\n',
  bash: 'for i in 1 2 3; do\n  echo "line $i"\n  sleep 0.5\ndone\necho "a note on stderr" >&2\n',
};

function highlighting(language) {
  if (language === 'javascript') return javascript();
  if (language === 'typescript') return javascript({ typescript: true });
  if (language === 'bash') return StreamLanguage.define(shell);
  return python();
}

// onRun() and onStop() are the page's; onStop returns whether a run was
// there to stop (otherwise Escape keeps its meaning in the editor).
export function createEditor(parent, { language, onRun, onStop }) {
  const languageSlot = new Compartment();
  const keys = Prec.highest(keymap.of([
    { key: 'Mod-Enter', run: () => { onRun(); return true; } },
    { key: 'Escape', run: () => onStop() },
  ]));
  const view = new EditorView({
    parent,
    doc: EXAMPLES[language],
    extensions: [
      keys,
      basicSetup,
      languageSlot.of(highlighting(language)),
      EditorView.contentAttributes.of({ 'aria-label': 'Code', 'aria-describedby': 'editor-help' }),
    ],
  });
  return {
    view,
    code: () => view.state.doc.toString(),
    setCode(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    setLanguage(next) {
      view.dispatch({ effects: languageSlot.reconfigure(highlighting(next)) });
    },
    focus: () => view.focus(),
  };
}
