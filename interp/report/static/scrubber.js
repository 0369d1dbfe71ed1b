// The attention-pattern scrubber's page script (interp/report/scrub_script.py inlines it once per
// page; interp/report/templates/scrubber.html.j2 is the markup it drives). Defines window.ELScrub:
// ELScrub.mount(id) reads the scrubber's JSON (ScrubData.payload: shapes, steps, tokens, and the
// pattern bytes deflated and base64-encoded, each step stored as its change from the step before),
// inflates the bytes with the browser's DecompressionStream and draws one canvas per head.
// Token text only ever reaches the page as textContent or canvas text: it stays data.
(function(){
if (window.ELScrub) return;
function lut(stops){const out=[];for(let i=0;i<=255;i++){const t=i/255;let j=0;while(j<stops.length-2&&t>stops[j+1][0])j++;
  const [t0,c0]=stops[j],[t1,c1]=stops[j+1],u=(t-t0)/(t1-t0);out.push(c0.map((c,k)=>Math.round(c+(c1[k]-c)*u)));}return out;}
const SEQ=lut([[0,[255,255,255]],[0.25,[198,219,239]],[0.5,[107,174,214]],[0.75,[33,113,181]],[1,[8,48,107]]]);
const DIV=lut([[0,[178,24,43]],[0.25,[239,138,98]],[0.5,[247,247,247]],[0.75,[103,169,207]],[1,[33,102,172]]]);
async function inflate(b64){const bin=atob(b64),bytes=new Uint8Array(bin.length);for(let i=0;i<bin.length;i++)bytes[i]=bin.charCodeAt(i);
  const stream=new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());}
function el(tag,props,parent){const e=document.createElement(tag);Object.assign(e,props||{});if(parent)parent.appendChild(e);return e;}
const all=[];
async function mount(id){
  const root=document.getElementById(id);
  const spec=JSON.parse(root.querySelector('script.el-scrub-data').textContent);
  const bytes=await inflate(spec.data);
  const n=spec.n, cells=spec.causal?n*(n+1)/2:n*n, H=spec.heads, L=spec.layers, S=spec.steps.length, V=spec.levels;
  const block=L*H*cells;  // one step of one prompt; stored as the change from the step before (mod 256)
  for(let p=0;p<spec.prompts;p++)for(let s=1;s<S;s++){const off=(p*S+s)*block;for(let i=0;i<block;i++)bytes[off+i]=(bytes[off+i]+bytes[off-block+i])&255;}
  // diff: show cur - reference; ref: -1 for the previous step, else a step index; fixed: the
  // difference scale is +-range (attention) at every step instead of the step's largest change
  const st={prompt:0,index:Math.max(0,Math.min(S-1,spec.start||0)),diff:false,ref:-1,fixed:false,range:0.5,order:spec.delta_p?'delta':'layer',
    big:null,timer:null,cell:10,scale:1,asked:null};
  const at=(q,k)=>spec.causal?(k>q?-1:q*(q+1)/2+k):q*n+k;
  const base=(p,s,l,h)=>(((p*S+s)*L+l)*H+h)*cells;
  const q_=s=>root.querySelector(s);
  const grid=q_('.el-scrub-grid'), play=q_('.el-scrub-play'), slider=q_('.el-scrub-slider'), label=q_('.el-scrub-step');
  const diff=q_('.el-scrub-diff'), refBox=q_('.el-scrub-ref'), fixedBox=q_('.el-scrub-fixed'), rangeBox=q_('.el-scrub-range');
  const orderBox=q_('.el-scrub-order'), chooser=q_('.el-scrub-prompt'), bar=q_('.el-scrub-scale'), scaleText=q_('.el-scrub-scale-text');
  const zoom=new Set(spec.zoom);
  const big=q_('.el-scrub-big'), bigTitle=q_('.el-scrub-big-title'), bigStep=q_('.el-scrub-big-step'), bigMatrix=q_('.el-scrub-big-matrix');
  spec.steps.forEach((s,i)=>{el('option',{value:i,textContent:'step '+s+(zoom.has(s)?' (zoomed)':'')},refBox);});
  const tip=el('div',{className:'el-scrub-tip'},document.body);
  let canvases=[];
  const dp=(l,h)=>spec.delta_p&&spec.delta_p[l]&&spec.delta_p[l][h]!=null?spec.delta_p[l][h]:null;
  const dpText=(l,h)=>{const v=dp(l,h);return v===null?'':'  '+(spec.delta_label||'Δp')+' '+spec.delta_text[l][h];};
  function order(){const heads=[];for(let l=0;l<L;l++)for(let h=0;h<H;h++)heads.push([l,h]);
    if(st.order!=='delta')return heads;
    return heads.sort((a,b)=>{const x=dp(a[0],a[1]),y=dp(b[0],b[1]);if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;return y-x;});}
  function build(){grid.textContent='';canvases=[];const heads=order();let row=null;
    heads.forEach(([l,h],rank)=>{if(st.order==='delta'?rank===0:h===0)row=el('div',{className:'el-scrub-layer'},grid);
      const box=el('div',{className:'el-scrub-head',tabIndex:0,title:'click or Enter: enlarge'},row);
      box.setAttribute('role','button');box.setAttribute('aria-label','enlarge head L'+l+'H'+h);
      el('span',{textContent:(st.order==='delta'&&dp(l,h)!==null?'#'+(rank+1)+' ':'')+'L'+l+'H'+h+dpText(l,h)},box);
      const c=el('canvas',{},box);c.dataset.layer=l;c.dataset.head=h;canvases.push(c);
      box.addEventListener('click',()=>open(l,h));
      box.addEventListener('keydown',ev=>{if(ev.key==='Enter'||ev.key===' '){ev.preventDefault();ev.stopPropagation();open(l,h);}});
      c.addEventListener('mousemove',ev=>hover(ev,c,l,h,st.cell,gap));c.addEventListener('mouseleave',()=>{tip.style.display='none';});});
    layout();}
  const gap=30;
  function layout(){const width=grid.clientWidth||800,cols=Math.min(H,4);const per=Math.max(120,Math.floor((width-6*(cols-1))/cols));
    st.cell=Math.max(3,Math.min(16,Math.floor((per-gap-2)/n)));
    const px=gap+n*st.cell+2, ratio=window.devicePixelRatio||1;
    for(const c of canvases){c.width=px*ratio;c.height=px*ratio;c.style.width=px+'px';c.style.height=px+'px';}}
  const refIndex=()=>st.ref<0?Math.max(0,st.index-1):st.ref;
  function paint(ctx,l,h,cs,x0){const cur=base(st.prompt,st.index,l,h),prev=base(st.prompt,refIndex(),l,h);
    for(let q=0;q<n;q++)for(let k=0;k<n;k++){const i=at(q,k);let rgb;
      if(i<0)rgb=[232,232,232];else if(st.diff){const d=(bytes[cur+i]-bytes[prev+i])/st.scale;rgb=DIV[Math.max(0,Math.min(255,Math.round((d+1)*127.5)))];}
      else rgb=SEQ[Math.round(bytes[cur+i]*255/V)];
      ctx.fillStyle='rgb('+rgb[0]+','+rgb[1]+','+rgb[2]+')';ctx.fillRect(x0+k*cs,q*cs,cs,cs);}}
  function drawHead(c,l,h){const ctx=c.getContext('2d'),ratio=window.devicePixelRatio||1,cs=st.cell;
    ctx.setTransform(ratio,0,0,ratio,0,0);ctx.fillStyle='#fff';ctx.fillRect(0,0,c.width,c.height);paint(ctx,l,h,cs,gap);
    if(cs>=7){const tokens=spec.tokens[st.prompt],font=Math.min(11,cs);ctx.fillStyle='#222';ctx.font=font+'px monospace';
      ctx.textAlign='right';ctx.textBaseline='middle';
      for(let q=0;q<n;q++)ctx.fillText(tokens[q].slice(0,5),gap-3,q*cs+cs/2,gap-4);
      ctx.save();ctx.translate(gap,n*cs);ctx.rotate(-Math.PI/2);
      for(let k=0;k<n;k++)ctx.fillText(tokens[k].slice(0,5),-3,k*cs+cs/2,gap-4);ctx.restore();}}
  function hover(ev,c,l,h,cs,x0){const r=c.getBoundingClientRect(),k=Math.floor((ev.clientX-r.left-x0)/cs),q=Math.floor((ev.clientY-r.top)/cs);
    if(k<0||q<0||k>=n||q>=n||at(q,k)<0){tip.style.display='none';return;}
    const t=spec.tokens[st.prompt],ri=refIndex(),cur=bytes[base(st.prompt,st.index,l,h)+at(q,k)],prev=bytes[base(st.prompt,ri,l,h)+at(q,k)];
    const digits=V>100?3:2,chg=(cur-prev)/V;
    tip.textContent='L'+l+'H'+h+'  query '+q+' "'+t[q]+'" → key '+k+' "'+t[k]+'"\nattention '+(cur/V).toFixed(digits)
      +'   change since step '+spec.steps[ri]+' '+(chg>=0?'+':'')+chg.toFixed(digits);
    tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';tip.style.display='block';}
  function changeScale(){if(st.fixed)return Math.max(1e-6,st.range*V);let m=1;const a=base(st.prompt,st.index,0,0),b=base(st.prompt,refIndex(),0,0);
    for(let i=0;i<block;i++){const d=Math.abs(bytes[a+i]-bytes[b+i]);if(d>m)m=d;}return m;}
  // the enlarged head: a canvas of readable cells, token labels as text (textContent) on both axes
  function bigCell(){const longest=Math.min(16,Math.max(...spec.tokens[st.prompt].map(t=>t.length)));const labels=longest*7.5+12;
    const room=Math.min(window.innerWidth-labels-70,window.innerHeight-labels-120);return Math.max(16,Math.min(40,Math.floor(room/n)));}
  function drawBig(){if(!st.big)return;const [l,h]=st.big,cs=bigCell(),tokens=spec.tokens[st.prompt];
    const longest=Math.min(16,Math.max(...tokens.map(t=>t.length))),lab=Math.ceil(longest*7.5+12);
    bigTitle.textContent='L'+l+'H'+h+dpText(l,h);bigStep.textContent=label.textContent
      +(st.asked&&st.asked[0]===st.index&&spec.steps[st.index]!==st.asked[1]?' · the recorded step nearest step '+st.asked[1]:'');
    bigMatrix.textContent='';bigMatrix.style.gridTemplateColumns=lab+'px '+(n*cs)+'px';bigMatrix.style.gridTemplateRows=lab+'px '+(n*cs)+'px';
    el('span',{},bigMatrix);
    const kl=el('div',{className:'el-scrub-klabels'},bigMatrix);
    for(let k=0;k<n;k++){const s=el('span',{textContent:tokens[k],title:'key '+k+': '+tokens[k]},kl);s.style.width=cs+'px';s.style.height=lab+'px';s.style.lineHeight=cs+'px';}
    const ql=el('div',{className:'el-scrub-qlabels'},bigMatrix);
    for(let q=0;q<n;q++){const s=el('span',{textContent:tokens[q],title:'query '+q+': '+tokens[q]},ql);s.style.height=cs+'px';s.style.lineHeight=cs+'px';s.style.width=lab+'px';}
    const c=el('canvas',{},bigMatrix),ratio=window.devicePixelRatio||1;c.width=n*cs*ratio;c.height=n*cs*ratio;c.style.width=n*cs+'px';c.style.height=n*cs+'px';
    const ctx=c.getContext('2d');ctx.setTransform(ratio,0,0,ratio,0,0);paint(ctx,l,h,cs,0);
    ctx.strokeStyle='rgba(0,0,0,0.08)';for(let i=1;i<n;i++){ctx.beginPath();ctx.moveTo(i*cs,0);ctx.lineTo(i*cs,n*cs);ctx.moveTo(0,i*cs);ctx.lineTo(n*cs,i*cs);ctx.stroke();}
    c.addEventListener('mousemove',ev=>hover(ev,c,l,h,cs,0));c.addEventListener('mouseleave',()=>{tip.style.display='none';});}
  function open(l,h){stop();st.big=[l,h];big.hidden=false;drawBig();big.focus();window.ELScrubActive=api;}
  function close(){if(!st.big)return;const [l,h]=st.big;st.big=null;big.hidden=true;tip.style.display='none';
    const i=order().findIndex(([a,b])=>a===l&&b===h);const box=grid.querySelectorAll('.el-scrub-head')[i];if(box)box.focus();}
  function nextHead(by){if(!st.big)return;const heads=order(),i=heads.findIndex(([a,b])=>a===st.big[0]&&b===st.big[1]);
    const [l,h]=heads[(i+by+heads.length)%heads.length];st.big=[l,h];drawBig();}
  function drawGrid(){st.scale=st.diff?changeScale():1;for(const c of canvases)drawHead(c,+c.dataset.layer,+c.dataset.head);
    const s=spec.steps[st.index],ri=refIndex(),first=st.ref<0&&st.index===0;
    label.textContent='step '+s+(zoom.has(s)?' (zoomed)':'')+' · checkpoint '+(st.index+1)+' of '+S
      +(st.diff?(first?' · first step: no change':' · minus step '+spec.steps[ri]):'')
      +(s===spec.pre?' · pre step':'')+(s===spec.post?' · post step':'');
    bar.style.background=st.diff?'linear-gradient(to right,rgb(178,24,43),rgb(247,247,247),rgb(33,102,172))':'linear-gradient(to right,#fff,rgb(8,48,107))';
    const top=(st.scale/V).toFixed(V>100?3:2);
    scaleText.textContent=st.diff?' −'+top+' … +'+top+(st.fixed?' (change in attention; fixed range)':' (change in attention; the largest at this step)'):' 0 … 1 (attention)';
    drawBig();}
  function markers(){const x=Math.max(spec.steps[st.index],0.5);
    for(const f of spec.figs){const gd=document.getElementById(f.id),fl=gd&&gd._fullLayout;if(!f.marker||!fl||!fl.xaxis||!fl._size)continue;
      let m=gd.querySelector('.el-scrub-marker');const host=gd.querySelector('.svg-container');if(!host)continue;
      if(!m){m=el('div',{className:'el-scrub-marker'},host);m.title='the step the grid shows';}
      const ax=fl.xaxis,size=fl._size,px=ax.l2p(ax.d2l(x));
      m.style.left=(size.l+px-1)+'px';m.style.top=size.t+'px';m.style.height=size.h+'px';m.style.display=(px>=-1&&px<=size.w+1)?'block':'none';}}
  for(const f of spec.figs){const gd=document.getElementById(f.id);if(gd&&gd.on)gd.on('plotly_afterplot',markers);}
  async function go(index){const t0=performance.now();st.index=Math.max(0,Math.min(S-1,index));slider.value=st.index;drawGrid();
    markers();await new Promise(r=>requestAnimationFrame(()=>r()));
    const ms=performance.now()-t0;root.dataset.frameMs=ms.toFixed(2);(window.ELScrubFrames=window.ELScrubFrames||[]).push(ms);}
  function stop(){if(st.timer){clearInterval(st.timer);st.timer=null;play.textContent='▶ play';}}
  function toggle(){if(st.timer){stop();return;}if(st.index>=S-1)go(0);play.textContent='❚❚ pause';
    st.timer=setInterval(()=>{if(st.index>=S-1){stop();return;}go(st.index+1);},600);}
  function setDiff(d){st.diff=!!d;diff.checked=st.diff;drawGrid();}
  function setRef(i){st.ref=i===null||i<0?-1:Math.max(0,Math.min(S-1,i));refBox.value=String(st.ref);drawGrid();}
  function setFixed(on,range){st.fixed=!!on;fixedBox.checked=st.fixed;if(range!==undefined&&range>0){st.range=+range;rangeBox.value=String(range);}drawGrid();}
  function setOrder(o){st.order=o;orderBox.value=o;build();drawGrid();}
  slider.addEventListener('input',()=>{stop();go(+slider.value);});
  diff.addEventListener('change',()=>setDiff(diff.checked));
  refBox.addEventListener('change',()=>{st.ref=+refBox.value;if(!st.diff)setDiff(true);else drawGrid();});
  fixedBox.addEventListener('change',()=>setFixed(fixedBox.checked));
  // a range typed in turns the fixed range (and the difference) on
  rangeBox.addEventListener('change',()=>{const v=+rangeBox.value;if(v>0&&v<=1){st.diff=true;diff.checked=true;setFixed(true,v);}});
  orderBox.addEventListener('change',()=>setOrder(orderBox.value));
  chooser.addEventListener('change',()=>{st.prompt=+chooser.value;drawGrid();});
  play.addEventListener('click',toggle);
  q_('.el-scrub-big-close').addEventListener('click',close);
  big.addEventListener('click',ev=>{if(ev.target===big)close();});
  // keys (listed on the page, in docs/guide.md and in `emergence scrub --help`)
  function key(ev){const t=ev.target,tag=t&&t.tagName,k=ev.key;
    if(ev.ctrlKey||ev.metaKey||ev.altKey)return false;
    if(tag==='SELECT'||(tag==='INPUT'&&t.type!=='checkbox'&&t.type!=='range'))return k==='Escape'&&st.big?(close(),true):false;
    if(k==='Escape'&&st.big){close();}
    else if(k==='ArrowRight'||k==='ArrowLeft'){if(t===slider&&!st.big)return false;stop();go(st.index+(k==='ArrowRight'?1:-1));}
    else if((k==='Home'||k==='End')&&t!==slider){stop();go(k==='Home'?0:S-1);}
    else if((k==='ArrowUp'||k==='ArrowDown')&&st.big)nextHead(k==='ArrowDown'?1:-1);
    else if(k==='d')setDiff(!st.diff);
    else if(k==='r'){setRef(st.index);setDiff(true);}
    else if(k==='f'){setFixed(!st.fixed);if(!st.diff)setDiff(true);}
    else if(k==='p')toggle();
    else return false;
    ev.preventDefault();return true;}
  root.addEventListener('keydown',ev=>{if(key(ev))ev.stopPropagation();});
  root.addEventListener('mousedown',()=>{window.ELScrubActive=api;});
  function values(l,h,ref){const out=[],cur=base(st.prompt,st.index,l,h),r=base(st.prompt,ref===undefined?refIndex():ref,l,h);
    for(let q=0;q<n;q++)for(let k=0;k<n;k++){const i=at(q,k);out.push(i<0?null:ref===null?bytes[cur+i]/V:(bytes[cur+i]-bytes[r+i])/V);}return out;}
  const api={go,key,root,draw:drawGrid,markers,open,close,setDiff,setRef,setFixed,setOrder,
    get index(){return st.index;},get steps(){return spec.steps;},get scale(){return st.diff?st.scale/V:1;},
    get reference(){return refIndex();},get enlarged(){return st.big;},get label(){return spec.label;},order,
    pattern:(l,h)=>values(l,h,null),difference:(l,h)=>values(l,h),
    setPrompt(p){st.prompt=p;chooser.value=p;drawGrid();}};
  all.push(api);
  // a link into the scrubber (the head timeline's cells): #run=<label>&head=L1H2&step=300 goes to
  // the recorded step nearest 300 and enlarges L1H2, in the scrubber of that run (or the page's
  // only one); a fragment naming no run goes to the page's first scrubber
  function fromHash(){const p=new URLSearchParams(location.hash.slice(1)),head=/^L(\d+)H(\d+)$/.exec(p.get('head')||'');
    const want=Number(p.get('step')),run=p.get('run'),roots=[...document.querySelectorAll('.el-scrub')];
    if(!head||p.get('step')===null||!Number.isFinite(want))return;
    if(run===null?roots[0]!==root:(spec.label!==run&&roots.length>1))return;
    const l=+head[1],h=+head[2];if(l>=L||h>=H)return;
    let best=0;spec.steps.forEach((s,i)=>{if(Math.abs(s-want)<Math.abs(spec.steps[best]-want))best=i;});
    st.asked=[best,want];stop();go(best);open(l,h);root.scrollIntoView();}
  build();let width=grid.clientWidth;drawGrid();markers();fromHash();window.addEventListener('hashchange',fromHash);
  window.addEventListener('resize',()=>{if(grid.clientWidth!==width){width=grid.clientWidth;layout();drawGrid();}else drawBig();});
  root.dataset.ready='1';
  return api;}
document.addEventListener('keydown',ev=>{if(ev.target!==document.body)return;const api=window.ELScrubActive||(all.length===1?all[0]:null);if(api)api.key(ev);});
window.ELScrub={mount:(id)=>{const p=mount(id);p.catch(e=>{console.error('scrubber '+id+': '+e);});return p;},all};
})();
