// The course website (book/conf.py).
//
// 1. The ☰ and "Contents" buttons open the navigation. sphinx-book-theme 1.4 and pydata-sphinx-theme 0.20
// bind their click handlers to the *first* `.primary-toggle` / `.secondary-toggle` of the page, a button of
// the theme's top bar that this site (course.css) and the book theme hide, so the visible buttons of the
// article's header did nothing (a known upstream bug). A click on a visible toggle that no theme handler
// took (they all stop its propagation) reaches the document, and is passed on to the bound button: the
// theme then opens its navigation dialog (narrow screens) or folds its sidebar (wide ones). If a later
// theme binds every button, its handler stops the click first and this does nothing.
document.addEventListener("click", (event) => {
  for (const kind of ["primary", "secondary"]) {
    const button = event.target.closest?.(`.${kind}-toggle`);
    const bound = document.querySelector(`.${kind}-toggle`);
    if (button && bound && button !== bound) {
      event.preventDefault();
      bound.click();
      return;
    }
  }
});

// 2. Figures. The notebooks draw them about 1,100 px wide; a phone's column shows them 358 px wide, so their text
// is 3-4 px tall. A figure shown smaller than it was drawn is marked "enlarge" and, on a click or tap, opens on
// this page at its drawn size (one image pixel per CSS pixel), in a viewer that scrolls both ways; its ×
// button, Escape or a tap beside the figure closes it. Without JavaScript the link opens the image file.
const courseFigures = () => document.querySelectorAll("div.cell_output img");

function courseMarkZoomable() {
  for (const img of courseFigures()) {
    const link = img.closest("a.course-zoom");
    if (!link) continue;
    const smaller = img.clientWidth > 0 && img.naturalWidth > img.clientWidth + 2;
    link.classList.toggle("course-zoomable", smaller);
    if (smaller) link.title = "Enlarge the figure (on this page)";
    else link.removeAttribute("title");
  }
}

function courseOpenFigure(img) {
  const opener = document.activeElement;
  const box = document.createElement("div");
  box.className = "course-lightbox";
  box.setAttribute("role", "dialog");
  box.setAttribute("aria-modal", "true");
  box.setAttribute("aria-label", img.alt ? `Figure: ${img.alt}` : "Figure at its drawn size");
  const bar = box.appendChild(document.createElement("div"));
  bar.className = "course-lightbox-bar";
  bar.appendChild(document.createElement("span")).textContent =
    "The figure at its drawn size: scroll or drag to see all of it.";
  const close = bar.appendChild(document.createElement("button"));
  close.type = "button";
  close.className = "course-lightbox-close";
  close.setAttribute("aria-label", "Close the figure");
  close.textContent = "×";
  const scroll = box.appendChild(document.createElement("div"));
  scroll.className = "course-lightbox-scroll";
  const big = scroll.appendChild(document.createElement("img"));
  big.src = img.currentSrc || img.src;
  big.alt = img.alt;
  big.style.width = `${img.naturalWidth}px`;
  const shut = () => {
    box.remove();
    document.documentElement.classList.remove("course-lightbox-open");
    document.removeEventListener("keydown", onKey, true);
    opener?.focus?.({preventScroll: true});
  };
  const onKey = (event) => {
    if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); shut(); }
  };
  close.addEventListener("click", shut);
  big.addEventListener("click", shut);
  box.addEventListener("click", (event) => { if (event.target === box || event.target === scroll) shut(); });
  document.addEventListener("keydown", onKey, true);
  document.documentElement.classList.add("course-lightbox-open");
  document.body.appendChild(box);
  close.focus({preventScroll: true});
}

document.addEventListener("DOMContentLoaded", () => {
  for (const img of courseFigures()) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.className = "course-zoom";
    img.replaceWith(link);
    link.appendChild(img);
    link.addEventListener("click", (event) => {
      event.preventDefault();
      if (link.classList.contains("course-zoomable")) courseOpenFigure(img);
    });
    if (!img.complete) img.addEventListener("load", courseMarkZoomable);
  }
  courseMarkZoomable();
  // Folded cells show their figures when opened; a turned phone changes the column's width.
  window.addEventListener("resize", courseMarkZoomable);
  document.addEventListener("toggle", courseMarkZoomable, true);
});
