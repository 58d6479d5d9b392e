// Drives Foxglove Studio (the studio-base web bundle) in headless Chromium with puppeteer-core and
// reports, as one JSON line on stdout, what the page shows. Every step waits on the page's state
// (bounded by cfg.timeout_ms, a failure bound, never a speed requirement); the first step that
// does not come true is named in "failed" with the page's text, and the later steps are skipped.
//
// Usage: node drive.mjs '<json>' with url, screenshot, puppeteer (puppeteer-core's ESM entry),
// chromium, timeout_ms, topics ({topic: schema name}), joints ([name]), diagnostic (a status name),
// min_body_pixels, and skip (names of steps not to take, e.g. for a bag).

const cfg = JSON.parse(process.argv[2]);
const { default: puppeteer } = await import(cfg.puppeteer);
const report = { steps: [], problems: null, joints: {}, body_pixels: 0, page_errors: [], failed: null };
const wait = { timeout: cfg.timeout_ms, polling: 250 };

// Pixels of the body's blue (the scene's spheres 0.2/0.3/0.8 and line 0.2/0.4/0.9, lit): hue
// 220-245 degrees, saturated. The grid (#248eff, hue 212) and the axes fall outside.
function countBodyPixels(png64) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas");
      c.width = img.width;
      c.height = img.height;
      const g = c.getContext("2d");
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) {
        const [r, gr, b] = [d[i] / 255, d[i + 1] / 255, d[i + 2] / 255];
        const max = Math.max(r, gr, b), min = Math.min(r, gr, b);
        if (max !== b || max < 0.3 || (max - min) / max < 0.45) continue;
        const hue = 60 * (4 + (r - gr) / (max - min));
        if (hue >= 220 && hue <= 245) n += 1;
      }
      resolve(n);
    };
    img.onerror = reject;
    img.src = "data:image/png;base64," + png64;
  });
}

const browser = await puppeteer.launch({
  executablePath: cfg.chromium, headless: true, timeout: cfg.timeout_ms, protocolTimeout: cfg.timeout_ms * 2,
  args: ["--no-sandbox", "--use-gl=swiftshader", "--enable-unsafe-swiftshader", "--window-size=1600,1000"],
});
const page = await browser.newPage();
await page.setViewport({ width: 1600, height: 1000 });
page.on("pageerror", (err) => report.page_errors.push(String(err).slice(0, 500)));

async function step(name, body) {
  if (report.failed || (cfg.skip ?? []).includes(name)) return;
  try {
    await body();
    report.steps.push(name);
  } catch (err) {
    const text = await page.evaluate(() => document.body.innerText).catch(() => "");
    report.failed = { step: name, error: String(err).slice(0, 500), page_text: text.slice(0, 4000) };
  }
}

await step("boot", async () => {
  await page.goto(cfg.url, { waitUntil: "load", timeout: cfg.timeout_ms });
  await page.waitForFunction(() => window.snakeBooted || window.snakeBootError, wait);
  const err = await page.evaluate(() => window.snakeBootError);
  if (err) throw new Error(`boot failed: ${err}`);
});

// The Problems tab of the data source sidebar: its list of problems ([] when it says there are none).
async function readProblems() {
  const clicked = await page.evaluate(() => {
    const tabs = [...document.querySelectorAll("button, [role=tab]")];
    const tab = tabs.find((e) => e.innerText.trim().startsWith("Problems"));  // "Problems\n2" with a count
    tab?.click();
    return Boolean(tab);
  });
  if (!clicked) throw new Error("no Problems tab in the data source sidebar");
  const found = await page.waitForFunction(() => {
    if (document.body.innerText.includes("No problems found")) return "[]";
    const items = [...document.querySelectorAll("li .MuiListItemText-primary")].map((e) => e.innerText);
    return items.length > 0 ? JSON.stringify(items) : false;
  }, wait);
  const problems = JSON.parse(await found.jsonValue());
  await page.evaluate(() => {
    [...document.querySelectorAll("button, [role=tab]")].find((e) => e.innerText.trim() === "Topics")?.click();
  });
  return problems;
}

// The data source sidebar lists each topic with its schema name on the next line (a channel
// whose schema the app cannot parse is left out, and named among the problems).
await step("topics listed with their schema names", async () => {
  try {
    await page.waitForFunction((topics) => {
      const lines = document.body.innerText.split("\n").map((s) => s.trim());
      return Object.entries(topics).every(([t, s]) => lines.some((l, i) => l === t && lines[i + 1] === s));
    }, wait, cfg.topics);
  } catch (err) {
    report.problems = await readProblems().catch(() => null);
    throw err;
  }
});

await step("no problems", async () => {
  report.problems = await readProblems();
  if (report.problems.length > 0) throw new Error(`problems: ${report.problems.join("; ")}`);
});

// Each joint's legend row in the plots shows its latest value (showPlotValuesInLegend).
const readJoints = (joints) => {
  const out = {};
  for (const name of joints) {
    out[name] = null;
    for (const label of document.querySelectorAll("div, p, span")) {
      if (label.children.length > 0 || label.textContent !== name) continue;
      const row = label.parentElement?.parentElement;
      const lines = (row?.innerText ?? "").split("\n").map((s) => s.trim()).filter(Boolean);
      const value = Number.parseFloat(lines[lines.indexOf(name) + 1]);
      if (Number.isFinite(value)) out[name] = value;
    }
  }
  return out;
};

await step("every joint plotted with a value", async () => {
  await page.evaluate(`window.snakeReadJoints = ${readJoints}`);
  await page.waitForFunction((joints) => Object.values(window.snakeReadJoints(joints)).every((v) => v !== null),
    wait, cfg.joints);
  report.joints = await page.evaluate((joints) => window.snakeReadJoints(joints), cfg.joints);
});

await step("joint values changing", async () => {
  await page.waitForFunction((joints, first) => {
    const got = window.snakeReadJoints(joints);
    return joints.some((j) => got[j] !== null && got[j] !== first[j]);
  }, wait, cfg.joints, report.joints);
});

await step("diagnostics show the gait node", async () => {
  await page.waitForFunction((name) => document.body.innerText.includes(name), wait, cfg.diagnostic);
});

await step("3D panel draws the body", async () => {
  const deadline = Date.now() + cfg.timeout_ms;
  for (;;) {
    const box = await page.evaluate(() => {
      const canvases = [...document.querySelectorAll("canvas")].map((c) => c.getBoundingClientRect());
      const r = canvases.sort((a, b) => b.width * b.height - a.width * a.height)[0];
      return r ? { x: r.x, y: r.y, width: r.width, height: r.height } : null;
    });
    if (box) {
      const png = await page.screenshot({ clip: box, encoding: "base64" });
      report.body_pixels = await page.evaluate(countBodyPixels, png);
      if (report.body_pixels >= cfg.min_body_pixels) return;
    }
    if (Date.now() > deadline) throw new Error(`only ${report.body_pixels} body pixels in the 3D panel`);
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => done())));  // the next frame
  }
});

await page.screenshot({ path: cfg.screenshot });
await browser.close();
console.log(JSON.stringify(report));
