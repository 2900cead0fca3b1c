/**
 * Runs as a tree by folder (experiment/date/variant/train|validation). A run can also be a
 * folder of other runs (`exp` and `exp/eval`), so a node may be both. Rows are flattened for
 * a virtual list: only expanded folders contribute their children.
 */
export interface RunNode {
  name: string; // this segment
  path: string; // full prefix, "/"-joined
  children: RunNode[];
  run: number; // index of the run ending here, -1 if none
  first: number; // runs beneath, as the index range [first, last] of the sorted run list
  last: number;
}

export interface RunRow {
  node: RunNode;
  depth: number;
}

/** `runs` must be sorted (the server sorts by name); each folder then spans a contiguous range. */
export function buildTree(runs: readonly string[]): RunNode {
  const root: RunNode = { name: "", path: "", children: [], run: -1, first: 0, last: runs.length - 1 };
  const stack: RunNode[] = [root];
  for (let i = 0; i < runs.length; i++) {
    const parts = runs[i]!.split("/");
    let depth = 0;
    // Reuse the open path as far as it matches: sorted input makes this linear overall.
    while (
      depth < parts.length &&
      depth + 1 < stack.length &&
      stack[depth + 1]!.name === parts[depth]
    ) {
      depth++;
    }
    stack.length = depth + 1;
    for (let d = depth; d < parts.length; d++) {
      const parent = stack[d]!;
      const node: RunNode = {
        name: parts[d]!,
        path: parts.slice(0, d + 1).join("/"),
        children: [],
        run: -1,
        first: i,
        last: i,
      };
      parent.children.push(node);
      stack.push(node);
    }
    for (const n of stack) n.last = i;
    stack[stack.length - 1]!.run = i;
  }
  return root;
}

/** Collapse chains of single-child folders that hold no run ("a/b/c" shown as one row). */
export function compact(node: RunNode): RunNode {
  const children = node.children.map(compact);
  let n: RunNode = { ...node, children };
  while (n.run < 0 && n.children.length === 1 && n.path !== "") {
    const only = n.children[0]!;
    n = { ...only, name: n.name + "/" + only.name };
  }
  return n;
}

export function flatten(
  root: RunNode,
  expanded: ReadonlySet<string>,
  visible: (run: number) => boolean,
): RunRow[] {
  const rows: RunRow[] = [];
  const walk = (node: RunNode, depth: number): boolean => {
    // A folder is listed when any run beneath it passes the filter.
    let any = node.run >= 0 && visible(node.run);
    const at = rows.length;
    if (node.path !== "") rows.push({ node, depth });
    const open = node.path === "" || expanded.has(node.path);
    if (open) {
      for (const c of node.children) any = walk(c, depth + 1) || any;
    } else if (!any) {
      for (let i = node.first; i <= node.last && !any; i++) any = visible(i);
    }
    if (!any && node.path !== "") rows.length = at;
    return any;
  };
  walk(root, -1);
  return rows;
}
